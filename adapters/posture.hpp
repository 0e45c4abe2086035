// A vendor's permission posture, apart from the session seam (session.hpp) so that what only
// compares postures (daemon/run/posture_check.hpp) does not rebuild with the seam.
#pragma once

#include <optional>
#include <string>

namespace mh::adapters {

// A vendor's permission posture (issue 27 section 6, daemon/run/posture_check.hpp): its permission
// mode (Claude's permissionMode, Codex's approvalPolicy) and its sandbox (Codex's sandbox mode),
// each in the vendor's own vocabulary as permission.set names it. nullopt: not said (a report
// that carries no sandbox, a vendor without one), never "none".
struct Posture {
  std::optional<std::string> permission_mode;
  std::optional<std::string> sandbox;
  bool operator==(const Posture&) const = default;
};

}  // namespace mh::adapters
