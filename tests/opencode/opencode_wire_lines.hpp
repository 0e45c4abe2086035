// opencode 1.18.33's lines around one bash call, as captured with the probe plugin: its ACP
// session/update notices and session/request_permission, and its seam plugin's hook request. Shared
// by the session's tests (tests/opencode/opencode_session_test.cpp) and the run core's
// (tests/run/run_core_opencode_test.cpp), so both feed what opencode really sends.
#pragma once

#include <boost/json.hpp>
#include <string>
#include <string_view>

namespace mh::test::opencode_wire {

inline constexpr std::string_view kSession = "ses_dbd9cffe4ffep6zk2miwlvdaMo";

inline std::string update(std::string_view body) {
  return R"({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":")" + std::string(kSession) +
         R"(","update":)" + std::string(body) + "}}";
}
// The tool_call notice opencode sends for a bash call the plugin saw first.
inline std::string notice(std::string_view id) {
  return update(R"({"sessionUpdate":"tool_call","toolCallId":")" + std::string(id) +
                R"(","title":"bash","kind":"execute","status":"pending","locations":[],"rawInput":{"cwd":"/w"}})");
}
// opencode restates a bash call's input as {command} (the plugin saw {command, description}).
inline std::string permission(std::string_view agent_id, std::string_view id, std::string_view command) {
  return R"({"jsonrpc":"2.0","id":)" + std::string(agent_id) +
         R"(,"method":"session/request_permission","params":{"sessionId":")" + std::string(kSession) +
         R"(","toolCall":{"toolCallId":")" + std::string(id) + R"(","title":")" + std::string(command) +
         R"(","kind":"execute","status":"pending","locations":[],"rawInput":{"command":")" + std::string(command) +
         R"("}},"options":[{"optionId":"once","kind":"allow_once","name":"Allow once"},{"optionId":"always","kind":"allow_always","name":"Always allow"},{"optionId":"reject","kind":"reject_once","name":"Reject"}]}})";
}
inline std::string ended(std::string_view id, std::string_view status, std::string_view raw_output) {
  return update(R"({"sessionUpdate":"tool_call_update","toolCallId":")" + std::string(id) + R"(","status":")" +
                std::string(status) + R"(","rawOutput":)" + std::string(raw_output) + "}");
}
// The seam plugin's tool.execute.before for a bash call.
inline boost::json::value seam_request(std::string_view id, std::string_view command) {
  return boost::json::object{{"hook", "tool.execute.before"},
                             {"tool", "bash"},
                             {"session_id", kSession},
                             {"call_id", id},
                             {"args", boost::json::object{{"command", command}, {"description", "m"}}}};
}

}  // namespace mh::test::opencode_wire
