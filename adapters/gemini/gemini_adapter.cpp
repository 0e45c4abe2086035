#include "adapters/gemini/gemini_adapter.hpp"

#include "adapters/acp/acp_adapter.hpp"
#include "adapters/gemini/gemini_plan.hpp"
#include "adapters/gemini/gemini_profile.hpp"
#include "adapters/plan_common.hpp"
#include "adapters/registry.hpp"
#include "adapters/vendor_descriptor.hpp"

namespace mh::adapters {
namespace gemini {

const proto::CapabilityTable& capabilities() {
  static const proto::CapabilityTable table = [] {
    // ACP's part (message_inject, steer, interrupt, halt) is every ACP vendor's: adapters/acp.
    proto::CapabilityTable t = acp::capability_table("gemini");
    using proto::CommandName;
    t.commands[CommandName::tool_decide] = {
        true,
        {},
        "ACP's session/request_permission for every tool call (an admin policy makes every tool ask): allow or "
        "deny; replace is refused (the answer carries no input), and a deny's reason does not reach the model"};
    t.commands[CommandName::frame_set] = {
        true, {}, "enforced at the permission request from the next turn; its text opens that turn"};
    t.commands[CommandName::permission_set] = {
        false, proto::RefusalCode::UNSUPPORTED_CONTROL,
        "Gemini CLI's permission posture is fixed at launch (an admin policy: every tool asks); its ACP session modes "
        "(default, autoEdit, yolo, plan) would let calls run unasked, so none is offered"};
    // Measured on 0.61.0 against the scripted endpoint (tests/gemini/gemini_park_test.cpp): the
    // refusal names what the real CLI does, so a harness reading the table learns why.
    t.parking = {false, proto::RefusalCode::UNSUPPORTED_CONTROL,
                 "gemini --acp (0.61.0) does not carry a call awaiting its permission to a later process: it records a "
                 "call only with its result, so the ending (or killed) process leaves the call in no record, and "
                 "session/load neither replays it nor asks its permission again (the model's next request does not "
                 "carry it)"};
    // glob and google_web_search render no operation of their own (one tool per operation).
    t.rendering = {{"file.read", "read_file"},     {"file.write", "write_file"}, {"file.edit", "replace"},
                   {"dir.list", "list_directory"}, {"search", "grep_search"},    {"shell", "run_shell_command"},
                   {"web.read", "web_fetch"},      {"skill.load", std::nullopt}, {"subagent.spawn", std::nullopt},
                   {"task.todo", "write_todos"},   {"mcp.call", std::nullopt}};
    t.notes = {
        "Gemini CLI's ACP mode fires no BeforeTool hook (0.61.0): ACP's permission request is the only seam, so a "
        "deny reaches the model as Gemini's own text (\"Tool \\\"<tool>\\\" was canceled by the user.\"); the run "
        "warns DENY_REASON_NOT_DELIVERED with the reason, and the turn goes on",
        "replace is refused UNSUPPORTED_CONTROL: a permission answer selects an option and carries no input",
        "Gemini CLI reports no tool input over ACP (no rawInput): a call is presented with input null, named by the "
        "tool its call id names (\"<tool>__<id>\"); a frame judges it by its tool",
        "\"Allow for this session\" (proceed_always) is never selected: it is a standing rule inside Gemini CLI",
        "the calls of one model message are asked one at a time, the next once the last is answered (Gemini CLI's "
        "ACP session runs them in turn): they cannot all be presented before an answer is due",
        "abstain claims nothing, but every call asks and no one else can answer: an abstained call is cancelled",
        "deny-only: no admin policy; Gemini CLI's default rules decide every call the run does not deny (its read "
        "tools run unasked, recorded as calls nothing gated)",
        "usage comes only from each session/prompt's answer (_meta.quota.token_count): scope unsaid"};
    return t;
  }();
  return table;
}

namespace {

// What this vendor gives the ACP adapter every ACP vendor shares (adapters/acp/acp_adapter.hpp).
const acp::AcpVendor& vendor() {
  static const acp::AcpVendor v{
      .identity = {"gemini", gemini::capabilities(), "node_modules/@google/gemini-cli/package.json", "gemini"},
      .make_plan = &make_plan,
      .make_session = &make_session,
      .default_model = kDefaultModel,
      // Gemini CLI waits on a permission answer with no timer of its own: the run's deadline timer
      // (a signed 32-bit millisecond count) is the only bound.
      .deadline_margin_s = 0,
  };
  return v;
}

class GeminiAdapter final : public acp::AcpAdapter {
 public:
  explicit GeminiAdapter(HostConfig config) : acp::AcpAdapter(vendor(), std::move(config)) {}
};

}  // namespace
}  // namespace gemini

std::unique_ptr<Adapter> make_gemini_adapter(const HostConfig& config) {
  return std::make_unique<gemini::GeminiAdapter>(config);
}

}  // namespace mh::adapters
