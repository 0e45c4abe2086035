// The fixture every real-CLI Claude suite shares: one `metaharness run claude …` per test,
// against the scripted endpoint playing a scenario from tests/scenarios/claude/.
#pragma once

#include "tests/support/governed_run.hpp"

namespace mh::test {

class ClaudeRun : public GovernedRun {
 protected:
  ClaudeRun() : GovernedRun("claude") {}
};

}  // namespace mh::test
