#include "adapters/opencode/opencode_adapter.hpp"

#include "adapters/acp/acp_adapter.hpp"
#include "adapters/opencode/opencode_plan.hpp"
#include "adapters/opencode/opencode_profile.hpp"
#include "adapters/plan_common.hpp"
#include "adapters/registry.hpp"
#include "adapters/vendor_descriptor.hpp"

namespace mh::adapters {
namespace opencode {

const proto::CapabilityTable& capabilities() {
  static const proto::CapabilityTable table = [] {
    // ACP's part (message_inject, steer, interrupt, halt) is every ACP vendor's: adapters/acp.
    proto::CapabilityTable t = acp::capability_table("opencode");
    using proto::CommandName;
    t.commands[CommandName::tool_decide] = {
        true, {}, "the seam plugin's tool.execute.before for every tool call; ACP's permission is the second gate"};
    t.commands[CommandName::frame_set] = {
        true, {}, "enforced at the call seam from the next turn; its text opens that turn"};
    t.commands[CommandName::permission_set] = {
        false, proto::RefusalCode::UNSUPPORTED_CONTROL,
        "opencode's permission rules are fixed at launch (ask for every tool) and no ACP session mode maps to a "
        "permission posture truthfully"};
    // Measured on 1.18.33 against the scripted endpoint (tests/opencode/opencode_park_test.cpp).
    t.parking = {false, proto::RefusalCode::UNSUPPORTED_CONTROL,
                 "opencode acp (1.18.33) does not carry a call awaiting its permission to a later process: "
                 "session/load replays it failed (or, after a kill, in progress) and session/resume replays "
                 "nothing, and neither asks its permission again"};
    t.rendering = {{"file.read", "read"},      {"file.write", "write"},   {"file.edit", "edit"},
                   {"dir.list", "glob"},       {"search", "grep"},        {"shell", "bash"},
                   {"web.read", "webfetch"},   {"skill.load", "skill"},   {"subagent.spawn", "task"},
                   {"task.todo", "todowrite"}, {"mcp.call", std::nullopt}};
    t.notes = {
        "a deny reaches the model as the tool's error result in its own words (the plugin throws the reason) and "
        "the agent loop goes on",
        "replace rewrites the call's arguments inside opencode before it runs: the replaced input is what runs",
        "an allow grants: the ACP permission that follows for the same call is answered allow_once without asking "
        "again",
        "abstain claims nothing, but under permission ask opencode runs nothing without an answer and no one else "
        "can give it: an abstained call's ACP permission is answered reject_once",
        "a permission request for a call the plugin never saw is presented on its own (seam control_request): "
        "allow (allow_once) or deny (reject_once, a fixed text to the model); replace is refused there",
        "\"always allow\" is never selected: it is a broad rule inside opencode that later, different calls pass",
        "fs/* and terminal/* requests are answered with an error (the client declares neither capability); after an "
        "approved edit opencode writes the file itself anyway",
        "the seam plugin denies by itself when it cannot reach the run, gets no answer in time, or cannot read the "
        "answer",
        "deny-only: no permission rule is generated, so opencode's own defaults decide every call the seam does not "
        "deny",
        "usage comes only from each session/prompt's answer (opencode 1.18.33 sends no usage_update): scope unsaid"};
    return t;
  }();
  return table;
}

std::filesystem::path default_binary(const std::filesystem::path& vendor_dir) {
  return vendor_dir / kBinaryUnderVendor;
}

std::filesystem::path plugin_package_dir(const std::filesystem::path& vendor_dir) {
  return seam_package_dir(descriptor().id, vendor_dir);
}

namespace {

// What this vendor gives the ACP adapter every ACP vendor shares (adapters/acp/acp_adapter.hpp).
const acp::AcpVendor& vendor() {
  static const acp::AcpVendor v{
      .identity = {"opencode", opencode::capabilities(), "node_modules/opencode-ai/package.json", "anthropic"},
      .make_plan = &make_plan,
      .make_session = &make_session,
      .default_model = kDefaultModel,
      // The plugin waits for the run's answer with setTimeout, whose delay is a signed 32-bit count of
      // milliseconds, until the deadline + 20 s: that must stay within 2^31 - 1 ms.
      .deadline_margin_s = 20,
  };
  return v;
}

class OpencodeAdapter final : public acp::AcpAdapter {
 public:
  explicit OpencodeAdapter(HostConfig config) : acp::AcpAdapter(vendor(), std::move(config)) {}

  // opencode's tools name their path filePath (read, write, edit) or path (glob, grep: a directory).
  std::vector<std::string> subjects_for(const ToolCall& call) const override {
    std::vector<std::string> out = Adapter::subjects_for(call);
    if (call.input.is_object())
      if (auto path = proto::string_at(call.input.get_object(), "filePath"); path && !path->empty())
        out.push_back("file:" + *path);
    return out;
  }
};

}  // namespace
}  // namespace opencode

std::unique_ptr<Adapter> make_opencode_adapter(const HostConfig& config) {
  return std::make_unique<opencode::OpencodeAdapter>(config);
}

}  // namespace mh::adapters
