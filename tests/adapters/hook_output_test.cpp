// The one PreToolUse hook answer both vendors read, for every decision.
#include "adapters/hook_output.hpp"

#include <gtest/gtest.h>

#include "protocol/json.hpp"

namespace mh::adapters {
namespace {

namespace proto = mh::protocol;

std::string rendered(const proto::Decision& d) {
  return proto::canonical_json(hook_output(d));
}

TEST(HookOutput, AllowGrantsAtTheHook) {
  EXPECT_EQ(rendered(proto::decision::Allow{}),
            R"({"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}})");
}

TEST(HookOutput, DenyCarriesItsReason) {
  EXPECT_EQ(rendered(proto::decision::Deny{"not in this step"}),
            R"({"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny",)"
            R"("permissionDecisionReason":"not in this step"}})");
}

TEST(HookOutput, ReplaceIsAnAllowWithTheUpdatedInput) {
  EXPECT_EQ(rendered(proto::decision::Replace{boost::json::object{{"command", "ls"}}}),
            R"({"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow",)"
            R"("updatedInput":{"command":"ls"}}})");
}

TEST(HookOutput, AbstainIsNoOpinion) {
  EXPECT_EQ(rendered(proto::decision::Abstain{}), "{}") << "the vendor's own permission pipeline decides";
}

}  // namespace
}  // namespace mh::adapters
