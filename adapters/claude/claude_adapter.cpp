#include "adapters/claude/claude_adapter.hpp"

#include <algorithm>
#include <array>
#include <map>

#include "adapters/claude/claude_reader.hpp"
#include "adapters/hook_output.hpp"
#include "adapters/offline.hpp"
#include "adapters/plan_common.hpp"
#include "adapters/registry.hpp"
#include "adapters/session.hpp"
#include "protocol/vendor_line.hpp"

namespace mh::adapters {
namespace claude {

namespace {

constexpr std::string_view kInitializeId = "mh-init";
constexpr std::string_view kHookCallbackId = "mh-pretooluse";

constexpr std::array<std::string_view, 6> kPostures = {"acceptEdits", "auto",    "bypassPermissions",
                                                       "default",     "dontAsk", "plan"};

// Vendor tools that render an operation in addition to the table's primary tool.
struct ToolAlias {
  std::string_view tool;
  proto::OpKind op;
};
constexpr ToolAlias kAliases[] = {
    {"NotebookEdit", proto::OpKind::file_edit}, {"WebSearch", proto::OpKind::web_read},
    {"Task", proto::OpKind::subagent_spawn},    {"TaskCreate", proto::OpKind::task_todo},
    {"TaskUpdate", proto::OpKind::task_todo},   {"TaskGet", proto::OpKind::task_todo},
    {"TaskList", proto::OpKind::task_todo},
};

// Variables the plan sets besides HOME, PATH, TMPDIR, CLAUDE_CONFIG_DIR and the run marker (or
// that would replace its credential): a run may not declare them.
constexpr std::array<std::string_view, 6> kOwnedEnv = {
    "ANTHROPIC_BASE_URL",      "ANTHROPIC_AUTH_TOKEN",   "ANTHROPIC_API_KEY",
    "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"};
// Safe and bare mode skip hooks silently: declared, they would take the call seam away.
constexpr std::array<std::string_view, 2> kSeamBreakers = {"CLAUDE_CODE_SAFE_MODE", "CLAUDE_CODE_SIMPLE"};

std::string control_request(std::string_view id, json::object request) {
  json::object o;
  o["type"] = "control_request";
  o["request_id"] = id;
  o["request"] = std::move(request);
  return proto::canonical_json(o);
}

}  // namespace

// A line over the vendor line bound that was one JSON object, and not control traffic: its
// skeleton is mapped (a result still ends its turn). Control traffic is never answered on a cut
// reading of it: it stays opaque.
bool oversized_record(const proto::FramedLine& line) {
  if (!line.too_long || !line.skeleton) return false;
  auto type = proto::string_at(line.skeleton->record, "type");
  return !(type && type->rfind("control_", 0) == 0);
}

const proto::CapabilityTable& capabilities() {
  static const proto::CapabilityTable table = [] {
    proto::CapabilityTable t = harness_capabilities("claude");
    using proto::CommandName;
    t.commands = {
        {CommandName::tool_decide, {true, {}, "in-band PreToolUse hook callback, answered with a control_response"}},
        {CommandName::frame_set, {true, {}, "enforced at the call seam from the next turn; its text opens that turn"}},
        {CommandName::message_inject, {true, {}, "a user message written between turns"}},
        {CommandName::steer,
         {false, proto::RefusalCode::UNSUPPORTED_CONTROL,
          "Claude Code headless has no mid-turn steer tier: a line sent mid-turn is folded in at "
          "the vendor's discretion or becomes the next turn, so a steer could not be promised"}},
        {CommandName::permission_set, {true, {}, "set_permission_mode control request"}},
        {CommandName::interrupt, {true, {}, "interrupt control request"}},
        {CommandName::halt, {true, {}, "interrupt, end_session, close stdin, then kill the run's processes"}},
    };
    // Verified on 2.1.197 against the scripted endpoint (tests/claude/claude_park_test.cpp): a
    // PreToolUse "defer" ends the turn (result stop_reason tool_deferred) and the process exits
    // once its stdin closes; `claude -p --resume <session>` with no prompt asks PreToolUse for
    // that call again right after initialize, and runs it or not by the answer.
    t.parking = {true, {}, "PreToolUse defer, then the session resumed with --resume; the decision answers the call"};
    t.rendering = {{"file.read", "Read"},      {"file.write", "Write"},   {"file.edit", "Edit"},
                   {"dir.list", "Glob"},       {"search", "Grep"},        {"shell", "Bash"},
                   {"web.read", "WebFetch"},   {"skill.load", "Skill"},   {"subagent.spawn", "Agent"},
                   {"task.todo", "TodoWrite"}, {"mcp.call", std::nullopt}};
    t.notes = {
        "an allow grants: Claude honours a hook allow and bypasses the rest of its permission "
        "pipeline, so a policy that relies on vendor rules must be deny-only",
        "abstain lets Claude's own pipeline decide: in default mode a non-read-only command is "
        "then denied (\"This command requires approval\"); read-only ones run",
        "also rendered: NotebookEdit -> file.edit, WebSearch -> web.read, Task -> subagent.spawn, "
        "TaskCreate/TaskUpdate/TaskGet/TaskList -> task.todo; mcp__<server>__<tool> -> mcp.call",
        "Glob and Grep are offered only when Bash is not; there is no LS tool",
        "permission.set: an allow overrides every posture but bypassPermissions, so without the "
        "deny-only policy those postures are refused SHADOWED",
        "a sub-agent's calls carry agent = the id of the Agent call that spawned it"};
    return t;
  }();
  return table;
}

bool is_known_posture(std::string_view posture) {
  for (auto p : kPostures)
    if (p == posture) return true;
  return false;
}

std::string_view posture_vocabulary() {
  return "acceptEdits, auto, bypassPermissions, default, dontAsk, plan";
}

// ---------------------------------------------------------------------------------------------
// The live session: reader + controller for one claude process
// ---------------------------------------------------------------------------------------------

namespace {

class Session final : public AdapterSession {
 public:
  Session(const RunSpec& spec, const LaunchPlan& plan)
      : cwd_(plan.cwd),
        reader_(Reader::Launch{plan.attestation,
                               proto::TranscriptRef{plan.transcript_path.string(), std::nullopt, std::nullopt},
                               std::nullopt}),
        hook_timeout_seconds_(hook_timeout_for(spec)) {}

  // The vendor's callback timeout sits above the run's decision deadline, so a deny for
  // silence is always metaharness's own (decided_by deadline), never the vendor's.
  static std::uint64_t hook_timeout_for(const RunSpec& spec) { return (spec.decision_deadline_ms + 999) / 1000 + 30; }

  void start(AdapterOutputs& sink) override {
    json::object matcher;
    matcher["matcher"] = "*";  // every tool, including MCP and sub-agent tools
    matcher["hookCallbackIds"] = json::array{kHookCallbackId};
    matcher["timeout"] = hook_timeout_seconds_;
    json::object request;
    request["subtype"] = "initialize";
    request["hooks"] = json::object{{"PreToolUse", json::array{std::move(matcher)}}};
    // Nothing else is written until the vendor confirms the seam is installed.
    sink.write_vendor(control_request(kInitializeId, std::move(request)));
  }

  void on_vendor_line(const proto::FramedLine& line, AdapterOutputs& sink) override {
    if (oversized_record(line)) {
      reader_.read_skeleton(*line.skeleton, line, sink);
      return;
    }
    auto classified = proto::classify_vendor_line(line);
    if (auto* opaque = std::get_if<proto::ev::Opaque>(&classified)) {
      sink.event(std::move(*opaque), std::nullopt);
      return;
    }
    const auto* record_ptr = std::get_if<json::object>(&classified);
    if (!record_ptr) return;  // blank: counts as a line, says nothing
    const json::object& record = *record_ptr;
    const json::value* type = record.if_contains("type");
    std::string_view t = type && type->is_string() ? std::string_view(type->get_string()) : std::string_view();
    if (t == "control_request" && handle_control_request(record, line, sink)) return;
    if (t == "control_response" && handle_control_response(record, sink)) return;
    if (t == "control_cancel_request") {
      if (const json::value* id = record.if_contains("request_id"); id && id->is_string()) {
        sink.call_withdrawn(ReplyToken{.id = std::string(id->get_string()), .seam = proto::Seam::hook});
        return;
      }
    }
    reader_.read_record(record, line, sink);
  }

  void on_vendor_end(AdapterOutputs&) override {}

  void answer(const ReplyToken& reply, const ToolCall&, const proto::Decision& decision,
              AdapterOutputs& sink) override {
    json::object response;
    response["subtype"] = "success";
    response["request_id"] = reply.id;
    response["response"] = hook_output(decision);
    json::object o;
    o["type"] = "control_response";
    o["response"] = std::move(response);
    sink.write_vendor(proto::canonical_json(o));
  }

  // Claude hands its hooks the input in its own normal form: a relative file_path (Read, Write,
  // Edit, NotebookEdit, Glob's path...) resolved against its working directory. That is the same
  // request; any other difference is not.
  bool same_request(const ToolCall& presented, const ToolCall& asked) const override {
    if (presented.name != asked.name) return false;
    if (proto::canonical_json(presented.input) == proto::canonical_json(asked.input)) return true;
    if (!presented.input.is_object() || !asked.input.is_object()) return false;
    const auto& p = presented.input.get_object();
    const auto& a = asked.input.get_object();
    if (p.size() != a.size()) return false;
    for (const auto& kv : p) {
      const json::value* other = a.if_contains(kv.key());
      if (!other) return false;
      if (proto::canonical_json(kv.value()) == proto::canonical_json(*other)) continue;
      bool path_key = kv.key() == "file_path" || kv.key() == "notebook_path" || kv.key() == "path";
      if (!path_key || !kv.value().is_string() || !other->is_string()) return false;
      std::filesystem::path given(std::string(kv.value().get_string()));
      std::filesystem::path resolved(std::string(other->get_string()));
      if (given.is_absolute() || !resolved.is_absolute() || cwd_.empty()) return false;
      if ((cwd_ / given).lexically_normal() != resolved.lexically_normal()) return false;
    }
    return true;
  }

  // Which postures an allow at the hook overrides, as observed on 2.1.197 (a Bash `python3 -c …`
  // that writes a file, a `touch`, a Write; each abstained, then allowed):
  //   plan        abstain: Write "Cannot write … while in plan mode", the python3 command denied by
  //               the auto-mode classifier; allow: both ran.
  //   default     abstain: touch "… was blocked", Write "Claude requested permissions …"; allow: ran.
  //   dontAsk     abstain: denied ("don't ask mode"); allow: ran.
  //   acceptEdits abstain: Write and touch ran, but python3 "This command requires approval";
  //               allow: it ran. Its refusals of everything that is not an edit are overridden.
  //   auto        abstain: the classifier denied python3; allow: it ran with no classifier request.
  //   bypassPermissions  refuses nothing an allow could override (a hook deny still wins), and
  //               Claude refuses the switch itself unless launched with
  //               --dangerously-skip-permissions, which the plan never passes: not shadowed.
  // So every posture that refuses anything is shadowed by an allow unless the run is deny-only.
  bool allow_overrides_posture(const std::string& posture) const override {
    return is_known_posture(posture) && posture != "bypassPermissions";
  }

  // The plan passes no --permission-mode (and loads no settings that could name one): Claude
  // starts in its `default` mode (issue 27 section 6: held against its system/init).
  std::optional<Posture> asked_posture() const override { return Posture{"default", std::nullopt}; }

  std::optional<proto::Refusal> check_decision(const ToolCall&, const proto::Decision& decision) const override {
    if (auto* r = std::get_if<proto::decision::Replace>(&decision); r && !r->input.is_object())
      return proto::Refusal{
          proto::RefusalCode::MALFORMED,
          "a replace for a Claude tool needs an object input (updatedInput); got " + proto::describe_json(r->input)};
    return std::nullopt;
  }

  // Parking (issue 27 §5), as observed on 2.1.197: a PreToolUse "defer" ends the turn at once
  // (result stop_reason "tool_deferred", deferred_tool_use); the process exits when its stdin
  // closes. `--resume <session>` with no prompt, once initialize has installed the seam again,
  // asks PreToolUse for the deferred call again and runs it or not by the answer; before its
  // init it writes the call's progress and hook attachment once (opaque) and the call's result.
  bool park(const ReplyToken& reply, const ToolCall&, AdapterOutputs& sink) override {
    // Nothing to resume it by (or a session id that would read as a flag).
    if (session_id_.empty() || session_id_.front() == '-' || reply.id.empty()) return false;
    json::object specific{{"hookEventName", "PreToolUse"}, {"permissionDecision", "defer"}};
    json::object response{{"subtype", "success"},
                          {"request_id", reply.id},
                          {"response", json::object{{"hookSpecificOutput", std::move(specific)}}}};
    sink.write_vendor(
        proto::canonical_json(json::object{{"type", "control_response"}, {"response", std::move(response)}}));
    return true;
  }
  std::vector<std::string> resume_args() const override {
    std::vector<std::string> args{"--resume", session_id_};
    if (mode_) args.insert(args.end(), {"--permission-mode", *mode_});
    return args;
  }
  // Claude 2.1.197 may run the deferred call on --resume before it reads the initialize that
  // installs the in-band seam again (RESUME_UNGOVERNED, seen in 15 of 20 daemon runs). The
  // decision is known before the process starts, so the process is started with it: a PreToolUse
  // COMMAND hook in --settings (honoured with --setting-sources "", observed on 2.1.197, and run
  // for the resumed call with no initialize read at all) that prints the decision's hook output
  // when its stdin names the parked call's tool_use_id and nothing for any other call, which the
  // in-band callback decides as ever once initialize is read. The call id and the output (an
  // embedder's reason) are data: each is one single-quoted shell word, never spliced raw
  // (carried_settings, below, says what cannot be carried).
  std::vector<std::string> resume_args(const ToolCall& call, const proto::Decision& decision) const override {
    auto args = resume_args();
    if (auto settings = carried_settings(call, decision)) args.insert(args.end(), {"--settings", *settings});
    return args;
  }
  bool resume_delivers_decision(const ToolCall& call, const proto::Decision& decision) const override {
    return carried_settings(call, decision).has_value();
  }
  void resume(AdapterOutputs& sink) override {
    reader_.skip_next_turn_start();
    start(sink);
  }

  void send_user_turn(const std::vector<std::string>& texts, AdapterOutputs& sink) override {
    json::array content;
    for (const auto& t : texts)
      content.push_back(json::object{{"type", "text"}, {"text", t}});
    json::object message{{"role", "user"}, {"content", std::move(content)}};
    json::object o{
        {"type", "user"}, {"session_id", ""}, {"message", std::move(message)}, {"parent_tool_use_id", nullptr}};
    sink.write_vendor(proto::canonical_json(o));
  }

  ControlAck interrupt(AdapterOutputs& sink) override {
    std::string id = next_control_id();
    sink.write_vendor(control_request(id, json::object{{"subtype", "interrupt"}}));
    return ControlAck::pending(id);
  }

  ControlAck steer(const std::string&, AdapterOutputs&) override {
    return ControlAck::refused(proto::RefusalCode::UNSUPPORTED_CONTROL,
                               capabilities().refusal_reason(proto::CommandName::steer));
  }

  ControlAck set_permission(const std::string& posture, AdapterOutputs& sink) override {
    // Claude accepts any string here without validation ("yolo" succeeds and does nothing):
    // a posture outside its vocabulary would be a control that appears to work and does not.
    if (!is_known_posture(posture))
      return ControlAck::refused(proto::RefusalCode::MALFORMED,
                                 "\"" + proto::excerpt(posture, 40) +
                                     "\" is not a Claude permission mode; the vocabulary is " +
                                     std::string(posture_vocabulary()));
    std::string id = next_control_id();
    sink.write_vendor(control_request(id, json::object{{"subtype", "set_permission_mode"}, {"mode", posture}}));
    modes_sent_[id] = posture;
    return ControlAck::pending(id);
  }

  void end_session(AdapterOutputs& sink) override {
    sink.write_vendor(
        control_request(next_control_id(), json::object{{"subtype", "end_session"}, {"reason", "metaharness halt"}}));
  }

  std::optional<proto::ev::SessionEnded> session_ended() const override { return reader_.session_ended(); }

 private:
  // The --settings text that answers the parked call with `decision`, or nothing when it cannot
  // be carried: an id whose JSON form is not plain (the match is on Claude's compact JSON), or a
  // text over one argument's bound (the kernel's MAX_ARG_STRLEN is 128 KiB: a replace with a large
  // input would fail the exec, so it is left to the in-band seam, RESUME_UNGOVERNED if it loses).
  static constexpr std::size_t kMaxCarriedSettingsBytes = 96 * 1024;
  static bool plain_call_id(const std::string& id) {
    return !id.empty() && std::all_of(id.begin(), id.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    });
  }
  static std::optional<std::string> carried_settings(const ToolCall& call, const proto::Decision& decision) {
    if (!plain_call_id(call.call_id)) return std::nullopt;
    const std::string match = "\"tool_use_id\":\"" + call.call_id + "\"";
    const std::string command = "case \"$(cat)\" in *" + shell_word(match) + "*) printf '%s' " +
                                shell_word(proto::canonical_json(hook_output(decision))) + " ;; esac";
    json::object hook{{"type", "command"}, {"command", command}};
    json::object matcher{{"matcher", "*"}, {"hooks", json::array{std::move(hook)}}};
    json::object settings{{"hooks", json::object{{"PreToolUse", json::array{std::move(matcher)}}}}};
    std::string text = proto::canonical_json(settings);
    if (text.size() > kMaxCarriedSettingsBytes) return std::nullopt;
    return text;
  }
  // One POSIX shell word holding `s` as it is: single-quoted, each ' written '\''.
  static std::string shell_word(const std::string& s) {
    std::string out = "'";
    for (char c : s)
      out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  }
  std::string next_control_id() { return "mh-ctl-" + std::to_string(++control_counter_); }

  // Returns false when the record is not one we handle (it then goes to the reader -> opaque).
  bool handle_control_request(const json::object& record, const proto::FramedLine&, AdapterOutputs& sink) {
    const json::value* id = record.if_contains("request_id");
    const json::value* request = record.if_contains("request");
    if (!id || !id->is_string() || !request || !request->is_object()) return false;
    const auto& req = request->get_object();
    const json::value* subtype = req.if_contains("subtype");
    if (!subtype || !subtype->is_string()) return false;
    std::string request_id(id->get_string());
    if (subtype->get_string() == "hook_callback") {
      ToolCall call;
      const json::value* input = req.if_contains("input");
      if (input && input->is_object()) {
        const auto& in = input->get_object();
        // The session a parked call is resumed in (its hook input names it).
        if (const json::value* sid = in.if_contains("session_id"); sid && sid->is_string() && session_id_.empty())
          session_id_ = sid->get_string();
        if (const json::value* n = in.if_contains("tool_name"); n && n->is_string()) call.name = n->get_string();
        if (const json::value* ti = in.if_contains("tool_input")) call.input = *ti;
        if (const json::value* tu = in.if_contains("tool_use_id"); tu && tu->is_string())
          call.call_id = tu->get_string();
        // Inside a sub-agent the input carries the sub-agent's own id. Claude asks about a
        // sub-agent's call before it shows the call (observed on 2.1.197), so this request may be
        // the call's presentation: attribute it as the assistant record will, to the Agent call
        // that spawned the sub-agent (learnt from its task_started record). Were that unknown,
        // the sub-agent's own id still says the call is not the main agent's.
        if (const json::value* agent = in.if_contains("agent_id"); agent && agent->is_string())
          call.agent = reader_.spawning_call(agent->get_string()).value_or(std::string(agent->get_string()));
      }
      if (call.call_id.empty())
        if (const json::value* tu = req.if_contains("tool_use_id"); tu && tu->is_string())
          call.call_id = tu->get_string();
      // A request we cannot correlate still gets an identity (and is decided like any call).
      if (call.call_id.empty()) call.call_id = "hook-" + request_id;
      sink.call_awaits_answer(std::move(call), ReplyToken{.id = request_id, .seam = proto::Seam::hook});
      return true;
    }
    // can_use_tool, elicitation, mcp_message, request_user_dialog: nothing we enabled asks for
    // these. Answer with an error so the vendor does not wait forever, and keep the record.
    json::object response{{"subtype", "error"},
                          {"request_id", request_id},
                          {"error", "metaharness does not serve " + std::string(subtype->get_string())}};
    sink.write_vendor(
        proto::canonical_json(json::object{{"type", "control_response"}, {"response", std::move(response)}}));
    return false;
  }

  bool handle_control_response(const json::object& record, AdapterOutputs& sink) {
    const json::value* response = record.if_contains("response");
    if (!response || !response->is_object()) return false;
    const auto& r = response->get_object();
    const json::value* id = r.if_contains("request_id");
    const json::value* subtype = r.if_contains("subtype");
    if (!id || !id->is_string() || !subtype || !subtype->is_string()) return false;
    bool ok = subtype->get_string() == "success";
    std::string error;
    if (const json::value* e = r.if_contains("error"); e && e->is_string()) error = e->get_string();
    if (id->get_string() == kInitializeId) {
      if (ok)
        sink.session_ready();
      else
        sink.fail_run("claude refused initialize, so the PreToolUse call seam is not installed: " + error);
      return true;
    }
    if (auto sent = modes_sent_.find(std::string(id->get_string())); sent != modes_sent_.end()) {
      if (ok) mode_ = sent->second;
      modes_sent_.erase(sent);
    }
    ControlReply reply;
    reply.control_id = std::string(id->get_string());
    reply.ok = ok;
    reply.vendor_error = error;
    if (const json::value* payload = r.if_contains("response")) reply.response = *payload;
    sink.control_answered(std::move(reply));
    return true;
  }

  std::filesystem::path cwd_;
  Reader reader_;
  std::uint64_t hook_timeout_seconds_;
  std::uint64_t control_counter_ = 0;
  std::string session_id_;  // from the first hook request: what --resume names
  // The permission mode Claude acknowledged last (permission.set), which a resumed process is
  // started in: Claude does not keep it in the session, so a bare --resume starts in "default".
  std::optional<std::string> mode_;
  std::map<std::string, std::string> modes_sent_;  // control id -> mode, until Claude answers
};

}  // namespace
}  // namespace claude

// ---------------------------------------------------------------------------------------------
// The adapter
// ---------------------------------------------------------------------------------------------

namespace {

class ClaudeAdapter final : public NpmCliAdapter {
 public:
  explicit ClaudeAdapter(HostConfig config)
      : NpmCliAdapter(
            {"claude", claude::capabilities(), "node_modules/@anthropic-ai/claude-code/package.json", "anthropic"},
            std::move(config)) {}

  std::variant<LaunchPlan, LaunchRefusal> plan(const RunSpec& spec, const RunPaths& paths) const override {
    // Claude takes no setting outside its environment that a run may declare (no vendor_options):
    // every key is unknown, and refused by name rather than recorded and ignored.
    VendorRules rules{
        .binary = configured_binary(config_, "claude", claude::default_binary(config_.vendor_dir)),
        .config_env = "CLAUDE_CONFIG_DIR",
        .config_home = "home/.claude",
        .owned_env = claude::kOwnedEnv,
        .seam_breakers = claude::kSeamBreakers,
        .seam_breaker_effect = "switches hooks off silently (safe/bare mode), which would remove the call seam",
        .vendor_options = {},
        .own_env_summary = "the model endpoint",
        .credential_detail = "",
        .version_source = "session.started"};
    auto drafted = common_plan(*this, spec, paths, rules);
    auto* draft = std::get_if<PlanDraft>(&drafted);
    if (!draft) return std::get<LaunchRefusal>(std::move(drafted));
    LaunchPlan& p = draft->plan;
    const std::string config_dir = draft->scratch.config_home.string();

    p.args = {
        "-p", "--input-format",     "stream-json", "--output-format", "stream-json", "--verbose", "--setting-sources",
        "",   "--strict-mcp-config"};
    if (spec.model) {
      p.args.push_back("--model");
      p.args.push_back(*spec.model);
    }
    p.env.emplace_back("ANTHROPIC_BASE_URL", spec.model_endpoint->base_url);
    p.env.emplace_back("ANTHROPIC_AUTH_TOKEN", spec.model_endpoint->token);
    p.env.emplace_back("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");

    using proto::HermeticRow;
    auto& a = p.attestation;
    a.imposed.insert(
        a.imposed.end(),
        {{HermeticRow::h1a,
          "CLAUDE_CONFIG_DIR=" + config_dir + " (a fresh scratch config home); no plugin was injected"},
         {HermeticRow::h1b, "CLAUDE_CONFIG_DIR=" + config_dir + " (no output style configured)"},
         {HermeticRow::h2, "--setting-sources \"\" (user, project and local settings and CLAUDE.md are not loaded)"},
         {HermeticRow::h5, "--strict-mcp-config with no --mcp-config: no MCP server"},
         {HermeticRow::h8,
          "argv and environment carry none of --bare, --safe-mode, --dangerously-skip-permissions, "
          "--add-dir, CLAUDE_CODE_SAFE_MODE, CLAUDE_CODE_SIMPLE"}});
    if (spec.cwd)
      a.unavailable.push_back({HermeticRow::h11, "the operator named the working directory " + *spec.cwd});
    else
      a.imposed.push_back(
          {HermeticRow::h11, "scratch working directory, and --setting-sources \"\" keeps CLAUDE.md out"});
    a.ambient_inputs = {"the git status of the working directory is part of Claude's system prompt",
                        "no network isolation: tools can reach whatever the host can"};
    note_observe_mode(spec, a.ambient_inputs,
                      "observe mode answers every call with allow, delivered as abstain under the deny-only policy: "
                      "Claude's own permission pipeline decides every call",
                      "observe mode answers every call with allow, and an allow on this wire grants: Claude "
                      "then bypasses the rest of its permission pipeline");
    p.notes = {"hook callback timeout " + std::to_string(claude::Session::hook_timeout_for(spec)) +
               " s, above the decision deadline of " + std::to_string(spec.decision_deadline_ms) + " ms"};
    return finish_plan(std::move(*draft), spec);
  }

  std::unique_ptr<AdapterSession> open_session(const RunSpec& spec, const LaunchPlan& plan) const override {
    return std::make_unique<claude::Session>(spec, plan);
  }

  std::vector<proto::Event> translate(std::string_view transcript, const std::string& run_id) const override {
    OfflineSink offline(*this, run_id);
    claude::Reader reader(claude::Reader::Launch{proto::HermeticAttestation{}, proto::TranscriptRef{}, std::nullopt});
    read_transcript(transcript, [&](const proto::FramedLine& line) {
      AdapterOutputs sink;
      if (claude::oversized_record(line)) {
        reader.read_skeleton(*line.skeleton, line, sink);
      } else {
        auto classified = proto::classify_vendor_line(line);
        if (auto* opaque = std::get_if<proto::ev::Opaque>(&classified))
          sink.event(std::move(*opaque), std::nullopt);
        else if (auto* record = std::get_if<json::object>(&classified))
          reader.read_record(*record, line, sink);
      }
      offline.fold(sink);
    });
    return offline.finish(reader.session_ended());
  }

  // Claude's hook timeout is declared in seconds (the deadline + 30 s) and kept as a JavaScript
  // timer, which holds at most 2^31 - 1 ms.
  std::uint64_t max_decision_deadline_ms() const override {
    constexpr std::uint64_t kTimerMaxMs = 2'147'483'647;
    return (kTimerMaxMs / 1000 - 30) * 1000;
  }

  std::vector<proto::Operation> operations_for(const ToolCall& call) const override {
    std::vector<proto::OpKind> also;
    for (const auto& alias : claude::kAliases)
      if (alias.tool == call.name) also.push_back(alias.op);
    return operations_with(capabilities(), call.name, also);
  }
};

}  // namespace

std::unique_ptr<Adapter> make_claude_adapter(const HostConfig& config) {
  return std::make_unique<ClaudeAdapter>(config);
}

}  // namespace mh::adapters
