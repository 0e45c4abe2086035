#include "adapters/hook_output.hpp"

namespace mh::adapters {

namespace json = boost::json;
namespace proto = mh::protocol;

json::value hook_output(const proto::Decision& decision) {
  json::object specific;
  specific["hookEventName"] = "PreToolUse";
  return std::visit(
      [&](const auto& d) -> json::value {
        using T = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<T, proto::decision::Abstain>) {
          return json::object{};  // no opinion: the vendor's own permission pipeline decides
        } else if constexpr (std::is_same_v<T, proto::decision::Allow>) {
          specific["permissionDecision"] = "allow";
        } else if constexpr (std::is_same_v<T, proto::decision::Deny>) {
          specific["permissionDecision"] = "deny";
          specific["permissionDecisionReason"] = d.reason;
        } else {
          specific["permissionDecision"] = "allow";
          specific["updatedInput"] = d.input;
        }
        return json::object{{"hookSpecificOutput", std::move(specific)}};
      },
      decision);
}

}  // namespace mh::adapters
