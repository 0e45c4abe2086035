#include "adapters/codex/codex_adapter.hpp"

#include <algorithm>
#include <array>

#include "adapters/codex/codex_internal.hpp"
#include "adapters/plan_common.hpp"
#include "adapters/registry.hpp"
#include "adapters/session.hpp"

namespace mh::adapters {
namespace codex {

namespace {

using proto::object_at;
using proto::string_at;

constexpr std::array<std::string_view, 3> kSafePostures = {"untrusted", "read-only", "workspace-write"};
constexpr std::array<std::string_view, 1> kWidePostures = {"danger-full-access"};

}  // namespace

const proto::CapabilityTable& capabilities() {
  static const proto::CapabilityTable table = [] {
    proto::CapabilityTable t = harness_capabilities("codex");
    using proto::CommandName;
    t.commands = {
        {CommandName::tool_decide,
         {true, {}, "approvals (accept / decline) for shell and patches; the PreToolUse hook for every other kind"}},
        {CommandName::frame_set, {true, {}, "enforced at the call seam from the next turn; its text opens that turn"}},
        {CommandName::message_inject, {true, {}, "the next turn/start"}},
        {CommandName::steer, {true, {}, "turn/steer against the active turn (lost with its turn: STEER_UNDELIVERED)"}},
        {CommandName::permission_set, {true, {}, "thread/settings/update, from the next turn"}},
        {CommandName::interrupt, {true, {}, "turn/interrupt, then thread/backgroundTerminals/clean"}},
        {CommandName::halt, {true, {}, "interrupt, close app-server's stdin, then kill the run's processes"}},
    };
    // Measured on 0.171.0 against the scripted endpoint (tests/codex/codex_park_test.cpp): the
    // refusal names what the real CLI does, so a harness reading the table learns why.
    t.parking = {false, proto::RefusalCode::UNSUPPORTED_CONTROL,
                 "codex app-server (0.171.0) does not carry a call awaiting its approval to a later process: the "
                 "ending process (or, after a kill, the resuming one) closes the call as aborted, and thread/resume "
                 "never asks its approval again"};
    t.rendering = {{"file.read", "view_image"}, {"file.write", "apply_patch"}, {"file.edit", "apply_patch"},
                   {"dir.list", std::nullopt},  {"search", std::nullopt},      {"shell", "Bash"},
                   {"web.read", std::nullopt},  {"skill.load", std::nullopt},  {"subagent.spawn", "spawn_agent"},
                   {"task.todo", std::nullopt}, {"mcp.call", std::nullopt}};
    t.notes = {
        "a deny of a shell command or patch is an approval decline, which carries no reason: metaharness "
        "injects the reason as a developer message (thread/inject_items) just before the decline, so the model "
        "reads it right after the tool's output; a deny at the hook carries its reason natively",
        "replace is refused (UNSUPPORTED_CONTROL): an approval answer is accept or decline and carries no input",
        "abstain claims nothing, but under approvalPolicy untrusted Codex runs nothing without an approval and "
        "there is no one else to give it: an abstained shell command or patch is declined; other kinds run",
        "allow grants, and more than the call asked: Codex re-runs an accepted command without its sandbox when "
        "the sandboxed attempt is denied (observed on 0.171.0), with no second approval; so permission.set "
        "read-only or workspace-write is refused SHADOWED unless the run is deny-only",
        "deny-only: the thread runs under approval policy never (Codex's sandbox and rules decide, escalations "
        "are rejected by Codex) and the PreToolUse hook decides every call, shell and patches included; an "
        "allow is delivered as no opinion",
        "a second approval request for an item already asked about (a re-run outside the sandbox) is its own "
        "call, <item id>/escalation-N with escalation true, never answered by the first one's decision",
        "a call the model itself asks to run outside the sandbox (exec_command sandbox_permissions "
        "require_escalated) is presented with escalation true and its sandbox_permissions and justification "
        "(from the model's raw function_call); an allow of it grants the escalation",
        "sub-agents: tool.requested.agent is the sub-agent's thread id; a deny reason is injected into that "
        "thread; a sub-agent's turns, text and thinking are opaque (turn.* count the main agent's turns)",
        "switched off at launch (registration tier): hosted web search (web_search = \"disabled\") and "
        "interactive TTY sessions (unified_exec_tty = false), the only sessions write_stdin can write into",
        "not gated, metadata only: tool_search",
        "permission.set accepts untrusted, read-only, workspace-write and danger-full-access; on-request, "
        "on-failure and never are refused SHADOWED: they let commands run without asking, switching the seam off",
        "the PreToolUse hook (mh-codex-hook) denies by itself when it cannot reach the run, because Codex fails "
        "open on a hook crash or timeout",
        "decisions in the PreToolUse hook's vocabulary: Codex's hook names a shell call Bash; the model's tool is "
        "exec_command"};
    return t;
  }();
  return table;
}

bool is_known_posture(std::string_view posture) {
  for (auto list : {std::vector<std::string_view>(kSafePostures.begin(), kSafePostures.end()),
                    std::vector<std::string_view>(kWidePostures.begin(), kWidePostures.end()),
                    std::vector<std::string_view>(kSeamOffPostures.begin(), kSeamOffPostures.end())})
    for (auto p : list)
      if (p == posture) return true;
  return false;
}

bool is_known_vendor_option(std::string_view key) {
  return std::find(kVendorOptions.begin(), kVendorOptions.end(), key) != kVendorOptions.end();
}

std::vector<std::string> patch_subjects(const json::value& input) {
  std::vector<std::string> out;
  auto add = [&](std::string_view path) {
    if (path.empty()) return;
    std::string subject = "file:" + std::string(path);
    if (std::find(out.begin(), out.end(), subject) == out.end()) out.push_back(std::move(subject));
  };
  if (!input.is_object()) return out;
  const json::object& in = input.get_object();
  // The approval's (and item/started's) changes: [{path, kind: {type, move_path?}, diff}], as
  // Codex resolved them.
  if (const json::value* changes = in.if_contains("changes"); changes && changes->is_array()) {
    for (const auto& c : changes->get_array()) {
      if (!c.is_object()) continue;
      if (auto path = string_at(c.get_object(), "path")) add(*path);
      if (const json::object* kind = object_at(c.get_object(), "kind")) {
        for (auto key : {"move_path", "movePath"})
          if (auto to = string_at(*kind, key)) add(*to);
      }
      for (auto key : {"move_path", "movePath"})
        if (auto to = string_at(c.get_object(), key)) add(*to);
    }
    return out;
  }
  // The patch text (the hook's tool_input.command), as the model wrote it: every file a header
  // names, verbatim.
  std::optional<std::string> text = string_at(in, "command");
  if (!text) text = string_at(in, "input");
  if (!text) return out;
  static constexpr std::array<std::string_view, 4> kHeaders = {
      "*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "};
  std::string_view rest = *text;
  while (!rest.empty()) {
    std::size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    for (auto header : kHeaders)
      if (line.substr(0, header.size()) == header) {
        std::string_view path = line.substr(header.size());
        while (!path.empty() && (path.back() == ' ' || path.back() == '\t'))
          path.remove_suffix(1);
        add(path);
      }
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return out;
}

namespace {

class CodexAdapter final : public NpmCliAdapter {
 public:
  explicit CodexAdapter(HostConfig config)
      : NpmCliAdapter({"codex", codex::capabilities(), "node_modules/@openai/codex/package.json", "openai-responses"},
                      std::move(config)) {}

  std::variant<LaunchPlan, LaunchRefusal> plan(const RunSpec& spec, const RunPaths& paths) const override {
    return make_plan(*this, config_, spec, paths);
  }

  std::unique_ptr<AdapterSession> open_session(const RunSpec& spec, const LaunchPlan& plan) const override {
    return make_session(plan, spec.deny_only, /*offline=*/false);
  }

  std::vector<proto::Event> translate(std::string_view transcript, const std::string& run_id) const override {
    LaunchPlan plan;
    auto session = make_session(plan, /*deny_only=*/false, /*offline=*/true);
    return translate_with_session(*this, *session, transcript, run_id);
  }

  // The bound is mh-codex-hook's, not Codex's. Measured on 0.171.0: Codex waits for an approval
  // indefinitely, and a hook `timeout` of 2^31 ms, 2^32 ms, even 1.8e13 s held a 3 s hook (it does
  // not overflow or fail at once). The hook program waits for the run's answer with poll(2),
  // whose timeout is an int of milliseconds, until the deadline + 20 s: that must stay within
  // 2^31 - 1 ms.
  std::uint64_t max_decision_deadline_ms() const override { return deadline_bound_of_int_ms_timer(20); }

  // The plan writes the model into config.toml: a run that names none gets this one.
  std::optional<std::string> default_model() const override { return std::string(kDefaultModel); }

  std::vector<std::string> subjects_for(const ToolCall& call) const override {
    if (call.name == "apply_patch") return patch_subjects(call.input);
    return Adapter::subjects_for(call);
  }

  std::vector<proto::Operation> operations_for(const ToolCall& call) const override {
    // The model's own names for a shell call, beside the hook's Bash.
    bool shell = call.name == "exec_command" || call.name == "write_stdin";
    return operations_with(capabilities(), call.name,
                           shell ? std::vector<proto::OpKind>{proto::OpKind::shell} : std::vector<proto::OpKind>{});
  }
};

}  // namespace
}  // namespace codex

std::unique_ptr<Adapter> make_codex_adapter(const HostConfig& config) {
  return std::make_unique<codex::CodexAdapter>(config);
}

}  // namespace mh::adapters
