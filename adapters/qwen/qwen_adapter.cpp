#include "adapters/qwen/qwen_adapter.hpp"

#include "adapters/acp/acp_adapter.hpp"
#include "adapters/plan_common.hpp"
#include "adapters/qwen/qwen_plan.hpp"
#include "adapters/qwen/qwen_profile.hpp"
#include "adapters/registry.hpp"
#include "adapters/vendor_descriptor.hpp"

namespace mh::adapters {
namespace qwen {

const proto::CapabilityTable& capabilities() {
  static const proto::CapabilityTable table = [] {
    // ACP's part (message_inject, steer, interrupt, halt) is every ACP vendor's: adapters/acp.
    proto::CapabilityTable t = acp::capability_table("qwen");
    using proto::CommandName;
    t.commands[CommandName::tool_decide] = {
        true,
        {},
        "ACP's session/request_permission for every tool call (permissions.ask names every tool), with the call's "
        "real input: allow or deny; replace is refused (the answer carries no input), and a deny's reason does not "
        "reach the model"};
    t.commands[CommandName::frame_set] = {
        true, {}, "enforced at the permission request from the next turn; its text opens that turn"};
    t.commands[CommandName::permission_set] = {
        false, proto::RefusalCode::UNSUPPORTED_CONTROL,
        "Qwen Code's permission posture is fixed at launch (approval mode default, every tool asking); its ACP session "
        "modes (auto-edit, auto: an LLM classifier, yolo, plan) would let calls run unasked or be approved by a "
        "classifier, so none is offered"};
    // Measured on 0.24.4 against the scripted endpoint (tests/qwen/qwen_park_test.cpp): the
    // refusal names what the real CLI does, so a harness reading the table learns why.
    t.parking = {false, proto::RefusalCode::UNSUPPORTED_CONTROL,
                 "qwen --acp (0.24.4) does not carry a call awaiting its permission to a later process: the ending "
                 "process cancels the call (\"Tool call was cancelled before execution.\"), a killed one leaves it "
                 "without a result that the next process reports as failed, and neither session/load nor "
                 "session/resume asks its permission again"};
    t.rendering = {{"file.read", "read_file"},  {"file.write", "write_file"}, {"file.edit", "edit"},
                   {"dir.list", std::nullopt},  {"search", "grep_search"},    {"shell", "run_shell_command"},
                   {"web.read", "web_fetch"},   {"skill.load", std::nullopt}, {"subagent.spawn", std::nullopt},
                   {"task.todo", "todo_write"}, {"mcp.call", std::nullopt}};
    t.notes = {
        "Qwen Code's PreToolUse hooks fire after its permission is granted and fail open on a hook error, so ACP's "
        "permission request is the seam: a deny is cancel, Qwen ends the turn and tells the model its own text "
        "(\"Tool \\\"<tool>\\\" was canceled by the user.\") in the next prompt's request; the run warns "
        "DENY_REASON_NOT_DELIVERED with the reason",
        "replace is refused UNSUPPORTED_CONTROL: a permission answer selects an option and carries no input",
        "a call is named by Qwen's own tool name (_meta.toolName) and carries its real input (rawInput)",
        "the calls of one model message are asked one at a time, the next once the last is answered; a cancelled "
        "call ends the turn, so the calls after it in the same message are not asked",
        "\"Always Allow\" options (proceed_always, proceed_always_project, proceed_always_user) are never selected: "
        "they write standing rules into Qwen's settings",
        "abstain claims nothing, but every call asks and no one else can answer: an abstained call is cancelled",
        "deny-only: no permissions.ask rule; Qwen Code's default rules decide every call the run does not deny (its "
        "read tools run unasked, recorded as calls nothing gated)",
        "usage comes from each model request's message chunk (_meta.usage; scope: request); its usage_update notices "
        "say only the context window"};
    return t;
  }();
  return table;
}

namespace {

// What this vendor gives the ACP adapter every ACP vendor shares (adapters/acp/acp_adapter.hpp).
const acp::AcpVendor& vendor() {
  static const acp::AcpVendor v{
      .identity = {"qwen", qwen::capabilities(), "node_modules/@qwen-code/qwen-code/package.json", "anthropic"},
      .make_plan = &make_plan,
      .make_session = &make_session,
      .default_model = kDefaultModel,
      // Qwen Code waits on a permission answer with no timer of its own: the run's deadline timer
      // (a signed 32-bit millisecond count) is the only bound.
      .deadline_margin_s = 0,
  };
  return v;
}

class QwenAdapter final : public acp::AcpAdapter {
 public:
  explicit QwenAdapter(HostConfig config) : acp::AcpAdapter(vendor(), std::move(config)) {}

  // Qwen Code's file tools name their path file_path.
  std::vector<std::string> subjects_for(const ToolCall& call) const override {
    std::vector<std::string> out = Adapter::subjects_for(call);
    if (call.input.is_object())
      if (auto path = proto::string_at(call.input.get_object(), "file_path"); path && !path->empty())
        out.push_back("file:" + *path);
    return out;
  }
};

}  // namespace
}  // namespace qwen

std::unique_ptr<Adapter> make_qwen_adapter(const HostConfig& config) {
  return std::make_unique<qwen::QwenAdapter>(config);
}

}  // namespace mh::adapters
