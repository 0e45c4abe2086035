#include "adapters/codex/codex_adapter.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <fstream>
#include <set>
#include <sstream>

#include "adapters/codex/codex_evidence.hpp"
#include "metaharness/build_info.hpp"
#include "protocol/digest.hpp"
#include "protocol/time_text.hpp"

namespace mh::adapters {
namespace codex {

namespace {

constexpr std::string_view kHookSocketEnv = "METAHARNESS_HOOK_SOCKET";
constexpr std::string_view kHookDeadlineEnv = "METAHARNESS_HOOK_DEADLINE_S";
constexpr std::string_view kTokenEnv = "METAHARNESS_MODEL_TOKEN";
constexpr std::string_view kDefaultModel = "gpt-5.5";  // a slug Codex knows: it offers apply_patch

// Notifications that only restate, piece by piece, what an item/completed then says in full.
// Codex stops sending them when asked (optOutNotificationMethods), so nothing is dropped: the
// vendor never says it. Everything else it says is read.
constexpr std::array<std::string_view, 9> kOptOut = {
    "item/agentMessage/delta",  "item/reasoning/summaryTextDelta",   "item/reasoning/summaryPartAdded",
    "item/reasoning/textDelta", "item/commandExecution/outputDelta", "item/fileChange/outputDelta",
    "item/plan/delta",          "item/mcpToolCall/progress",         "thread/status/changed"};

constexpr std::array<std::string_view, 3> kSafePostures = {"untrusted", "read-only", "workspace-write"};
constexpr std::array<std::string_view, 1> kWidePostures = {"danger-full-access"};
// Approval policies that let commands run without asking: they would switch the seam off.
constexpr std::array<std::string_view, 3> kSeamOffPostures = {"on-request", "on-failure", "never"};

constexpr std::array<std::string_view, 2> kVendorOptions = {"request_max_retries", "stream_max_retries"};

std::string toml_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out + "\"";
}

std::optional<std::string> string_at(const json::object& o, std::string_view k) {
  const json::value* v = o.if_contains(k);
  if (v && v->is_string()) return std::string(v->get_string());
  return std::nullopt;
}

const json::object* object_at(const json::object& o, std::string_view k) {
  const json::value* v = o.if_contains(k);
  return v && v->is_object() ? &v->get_object() : nullptr;
}

std::optional<std::uint64_t> u64_at(const json::object& o, std::initializer_list<std::string_view> keys) {
  for (auto k : keys) {
    const json::value* v = o.if_contains(k);
    if (!v) continue;
    if (v->is_uint64()) return v->get_uint64();
    if (v->is_int64() && v->get_int64() >= 0) return static_cast<std::uint64_t>(v->get_int64());
  }
  return std::nullopt;
}

// Codex notifications carry emittedAtMs: the vendor's own clock, as RFC 3339.
std::optional<std::string> at_of(const json::object& message) {
  const json::value* ms = message.if_contains("emittedAtMs");
  if (!ms) {
    if (const json::object* params = object_at(message, "params")) ms = params->if_contains("emittedAtMs");
  }
  auto exact = ms ? proto::exact_int64(*ms) : std::nullopt;
  if (!exact) return std::nullopt;
  return proto::rfc3339_millis(*exact);
}

// The HTTP status inside a codexErrorInfo ({"httpConnectionFailed":{"httpStatusCode":401}}, ...).
std::optional<std::uint64_t> http_status(const json::value* info) {
  if (!info || !info->is_object()) return std::nullopt;
  for (const auto& kv : info->get_object())
    if (kv.value().is_object())
      if (auto s = u64_at(kv.value().get_object(), {"httpStatusCode"})) return s;
  return std::nullopt;
}

}  // namespace

const proto::CapabilityTable& capabilities() {
  static const proto::CapabilityTable table = [] {
    proto::CapabilityTable t;
    t.adapter_id = "codex";
    t.adapter_class = proto::AdapterClass::harness;
    for (const auto& pin : build_info::vendor_pins)
      if (pin.adapter == "codex") t.versions_pinned.emplace_back(pin.version);
    t.tiers = {{proto::Tier::registration, proto::TierStatus::delivered},
               {proto::Tier::call, proto::TierStatus::delivered},
               {proto::Tier::turn, proto::TierStatus::delivered},
               {proto::Tier::kill, proto::TierStatus::delivered}};
    using proto::CommandName;
    t.commands = {
        {CommandName::tool_decide,
         {true, {}, "approvals (accept / decline) for shell and patches; the PreToolUse hook for every other kind"}},
        {CommandName::frame_set, {true, {}, "enforced at the call seam from the next turn; its text opens that turn"}},
        {CommandName::message_inject, {true, {}, "the next turn/start"}},
        {CommandName::steer, {true, {}, "turn/steer against the active turn"}},
        {CommandName::permission_set, {true, {}, "thread/settings/update, from the next turn"}},
        {CommandName::interrupt, {true, {}, "turn/interrupt, then thread/backgroundTerminals/clean"}},
        {CommandName::halt, {true, {}, "interrupt, close app-server's stdin, then kill the run's processes"}},
    };
    t.decision_modes = {{proto::DecisionMode::frame, proto::TierStatus::delivered},
                        {proto::DecisionMode::ask, proto::TierStatus::delivered},
                        {proto::DecisionMode::observe, proto::TierStatus::delivered}};
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
        "allow grants, and more than on Claude: Codex re-runs an accepted command without its sandbox when "
        "the sandboxed attempt is denied (observed on 0.171.0), with no second approval; so permission.set "
        "read-only or workspace-write is refused SHADOWED unless the run is deny-only",
        "deny-only: the thread runs under approval policy never (Codex's sandbox and rules decide, escalations "
        "are rejected by Codex) and the PreToolUse hook decides every call, shell and patches included; an "
        "allow is delivered as no opinion",
        "a second approval request for an item already asked about (a re-run outside the sandbox) is its own "
        "call, <item id>/escalation-N with escalation true, never answered by the first one's decision",
        "sub-agents: tool.requested.agent is the sub-agent's thread id; a deny reason is injected into that "
        "thread; a sub-agent's turns, text and thinking are opaque (turn.* count the main agent's turns)",
        "switched off at launch (registration tier): hosted web search (web_search = \"disabled\") and "
        "interactive TTY sessions (unified_exec_tty = false), the only sessions write_stdin can write into",
        "not gated, metadata only: tool_search",
        "permission.set accepts untrusted, read-only, workspace-write and danger-full-access; on-request, "
        "on-failure and never are refused SHADOWED: they let commands run without asking, switching the seam off",
        "the PreToolUse hook (mh-codex-hook) denies by itself when it cannot reach the run, because Codex fails "
        "open on a hook crash or timeout",
        "decisions in the Claude vocabulary: Codex's hook names a shell call Bash; the model's tool is exec_command"};
    return t;
  }();
  return table;
}

std::filesystem::path default_binary(const std::filesystem::path& vendor_dir) {
  return vendor_dir / "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";
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

// ---------------------------------------------------------------------------------------------
// The session: reader + controller for one `codex app-server`
// ---------------------------------------------------------------------------------------------

namespace {

// What an answer of app-server is for. The evidence requests are asked while the thread starts
// (mcp_servers right after, since it needs the thread): session.started waits for their answers.
enum class Purpose {
  initialize,
  thread_start,
  account,
  plugins,
  config,
  mcp_servers,
  turn_start,
  control,
  inject,
  clean,
  other
};

class Session final : public AdapterSession {
 public:
  // `offline`: the reader alone over a retained transcript (translate), where no request of ours
  // is known and answers are recognised by their shape.
  Session(const LaunchPlan& plan, bool deny_only, bool offline = false)
      : cwd_(plan.cwd),
        attestation_(plan.attestation),
        transcript_(plan.transcript_path.string()),
        deny_only_(deny_only),
        offline_(offline) {}

  // --- start ---------------------------------------------------------------------------------

  void start(AdapterSink& sink) override {
    json::array opt_out;
    for (auto m : kOptOut)
      opt_out.emplace_back(m);
    request(
        sink, "initialize",
        json::object{{"clientInfo", json::object{{"name", "metaharness"},
                                                 {"title", "metaharness"},
                                                 {"version", std::string(build_info::version)}}},
                     {"capabilities", json::object{{"experimentalApi", true}, {"optOutNotificationMethods", opt_out}}}},
        Purpose::initialize);
  }

  // --- reading -------------------------------------------------------------------------------

  void on_vendor_line(const proto::FramedLine& line, AdapterSink& sink) override {
    if (line.too_long) {
      opaque(sink, std::nullopt, std::nullopt, line.digest, line.number);
      return;
    }
    if (line.text.find_first_not_of(" \t\r") == std::string_view::npos) return;
    auto value = proto::parse_json(line.text);
    if (!value || !value->is_object()) {
      opaque(sink, std::nullopt, std::nullopt, proto::sha256_hex(line.text), line.number);
      return;
    }
    read(value->get_object(), line.text, line.number, sink);
  }

  void read(const json::object& m, std::string_view raw, std::uint64_t line_no, AdapterSink& sink) {
    auto method = string_at(m, "method");
    const json::value* id = m.if_contains("id");
    // Offline, where the start-up answers end is known only by what follows them: the first
    // server request or answer that is not evidence came after the session opened.
    if (offline_ && thread_result_ && !started_ && id && !evidence_shaped(m)) open_session(sink, /*ready=*/true);
    const json::object* params = object_at(m, "params");
    static const json::object kEmpty;
    if (method && id) {
      server_request(*method, *id, params ? *params : kEmpty, raw, line_no, sink);
    } else if (method) {
      notification(*method, m, params ? *params : kEmpty, raw, line_no, sink);
    } else if (id && (m.contains("result") || m.contains("error"))) {
      response(*id, m, raw, line_no, sink);
    } else {
      opaque(sink, std::nullopt, std::nullopt, proto::sha256_hex(raw), line_no);
    }
  }

  void on_vendor_end(AdapterSink& sink) override {
    // A thread that started is recorded even if Codex went before answering all the evidence
    // requests (what it did not answer stays unknown); nothing is left to start a turn in.
    if (thread_result_ && !started_) open_session(sink, /*ready=*/false);
    release_early_notifications(sink);
  }

  // --- hooks ---------------------------------------------------------------------------------

  void on_hook_request(std::uint64_t connection, const json::value& input, AdapterSink& sink) override {
    const json::object* in = input.is_object() ? &input.get_object() : nullptr;
    auto tool = in ? string_at(*in, "tool_name") : std::nullopt;
    auto id = in ? string_at(*in, "tool_use_id") : std::nullopt;
    if (!in || !tool || !id) {
      sink.reply_hook(connection,
                      deny_hook("the hook input names no tool or no tool_use_id, so it cannot be governed"));
      return;
    }
    ToolCall call{*id, *tool, in->contains("tool_input") ? in->at("tool_input") : json::value(nullptr),
                  proto::Seam::hook};
    // A sub-agent's hook input names the sub-agent (agent_id, its own thread id) beside the
    // root session_id; the main agent's names none.
    call.agent = agent_of(string_at(*in, "agent_id").value_or(""));
    if (!deny_only_ && (*tool == "Bash" || *tool == "apply_patch")) {
      // Shell commands and patches are decided at their approval, which always follows under
      // untrusted: the hook only announces the call (so it is delivered as early as possible)
      // and has no opinion. (Deny-only runs have no approvals: the hook decides every kind.)
      call.seam = proto::Seam::control_request;
      sink.call_presented(std::move(call), std::nullopt);
      sink.reply_hook(connection, "");
      return;
    }
    sink.call_awaits_answer(std::move(call), ReplyToken{"hook:" + std::to_string(connection), proto::Seam::hook});
  }

  void on_hook_gone(std::uint64_t connection, AdapterSink& sink) override {
    sink.call_withdrawn(ReplyToken{"hook:" + std::to_string(connection), proto::Seam::hook});
  }

  // --- answering -----------------------------------------------------------------------------

  void answer(const ReplyToken& reply, const ToolCall& call, const proto::Decision& decision,
              AdapterSink& sink) override {
    if (reply.id.rfind("hook:", 0) == 0) {
      std::uint64_t connection = std::stoull(reply.id.substr(5));
      if (auto* deny = std::get_if<proto::decision::Deny>(&decision))
        sink.reply_hook(connection, deny_hook(deny->reason));
      else
        sink.reply_hook(connection, "");  // allow and abstain: no opinion, the call runs
      return;
    }
    auto it = approvals_.find(reply.id);
    if (it == approvals_.end()) return;
    json::value request_id = it->second;
    approvals_.erase(it);
    bool accept = std::holds_alternative<proto::decision::Allow>(decision);
    if (auto* deny = std::get_if<proto::decision::Deny>(&decision)) {
      // A decline carries no reason; a developer message just before it does, and the model
      // reads it right after the tool's output.
      json::array content{json::object{
          {"type", "input_text"},
          {"text", "metaharness denied the " + call.name + " call " + call.call_id + ": " + deny->reason}}};
      request(
          sink, "thread/inject_items",
          json::object{
              // The thread that made the call: a sub-agent's deny reason belongs in its own thread.
              {"threadId", call.agent.value_or(thread_id_)},
              {"items", json::array{json::object{{"type", "message"}, {"role", "developer"}, {"content", content}}}}},
          Purpose::inject);
    }
    // Never acceptForSession or acceptWithExecpolicyAmendment: both create allow rules, the
    // second on disk, for later runs too.
    sink.write_vendor(proto::canonical_json(
        json::object{{"id", request_id}, {"result", json::object{{"decision", accept ? "accept" : "decline"}}}}));
  }

  std::optional<proto::Refusal> check_decision(const ToolCall&, const proto::Decision& decision) const override {
    if (std::holds_alternative<proto::decision::Replace>(decision))
      return proto::Refusal{proto::RefusalCode::UNSUPPORTED_CONTROL,
                            "the codex adapter cannot honour replace: an approval answer is accept or decline and "
                            "carries no input"};
    return std::nullopt;
  }

  // An accepted command that Codex's sandbox then refuses is re-run outside the sandbox with no
  // second approval (observed on 0.171.0 under untrusted: an allowed `touch` under read-only
  // wrote its file). So an allow overrides both sandbox postures; untrusted is an approval
  // policy and danger-full-access has nothing to override.
  bool allow_overrides_posture(const std::string& posture) const override {
    return posture == "read-only" || posture == "workspace-write";
  }

  // Codex restates a call in several shapes (the hook's tool_input, item/started, the approval),
  // all from Codex itself and all under the one call id the model chose: the same tool is the
  // same call.
  bool same_request(const ToolCall& presented, const ToolCall& asked) const override {
    return presented.name == asked.name;
  }

  // --- controlling ---------------------------------------------------------------------------

  void send_user_turn(const std::vector<std::string>& texts, AdapterSink& sink) override {
    json::array input;
    for (const auto& t : texts)
      input.push_back(json::object{{"type", "text"}, {"text", t}});
    request(sink, "turn/start", json::object{{"threadId", thread_id_}, {"input", std::move(input)}},
            Purpose::turn_start);
  }

  ControlAck interrupt(AdapterSink& sink) override {
    if (active_turn_.empty())
      return ControlAck::refused(proto::RefusalCode::TOO_LATE, "no turn is running; nothing to interrupt");
    std::int64_t id = request(sink, "turn/interrupt", json::object{{"threadId", thread_id_}, {"turnId", active_turn_}},
                              Purpose::control);
    // turn/interrupt ends the turn but leaves a running command running: clean them up too.
    request(sink, "thread/backgroundTerminals/clean", json::object{{"threadId", thread_id_}}, Purpose::clean);
    return ControlAck::pending("rpc:" + std::to_string(id));
  }

  ControlAck steer(const std::string& text, AdapterSink& sink) override {
    if (active_turn_.empty()) return ControlAck::refused(proto::RefusalCode::TOO_LATE, "no turn is running to steer");
    std::int64_t id = request(sink, "turn/steer",
                              json::object{{"threadId", thread_id_},
                                           {"expectedTurnId", active_turn_},
                                           {"input", json::array{json::object{{"type", "text"}, {"text", text}}}}},
                              Purpose::control);
    steers_in_flight_.push_back(text);
    return ControlAck::pending("rpc:" + std::to_string(id));
  }

  ControlAck set_permission(const std::string& posture, AdapterSink& sink) override {
    for (auto off : kSeamOffPostures)
      if (posture == off)
        return ControlAck::refused(proto::RefusalCode::SHADOWED,
                                   "approval policy \"" + posture +
                                       "\" lets Codex run commands without asking, which "
                                       "would switch the approval seam off while calls still appeared governed");
    if (deny_only_ && posture == "untrusted")
      return ControlAck::refused(proto::RefusalCode::UNSUPPORTED_CONTROL,
                                 "a deny-only Codex run keeps approval policy never, so that Codex's own rules "
                                 "decide: under untrusted every command would wait for an approval that deny-only "
                                 "never gives, and nothing would run");
    json::object settings{{"threadId", thread_id_}};
    if (posture == "untrusted")
      settings["approvalPolicy"] = "untrusted";
    else if (posture == "read-only")
      settings["sandboxPolicy"] = json::object{{"type", "readOnly"}};
    else if (posture == "workspace-write")
      settings["sandboxPolicy"] = json::object{{"type", "workspaceWrite"}};
    else if (posture == "danger-full-access")
      settings["sandboxPolicy"] = json::object{{"type", "dangerFullAccess"}};
    else
      return ControlAck::refused(
          proto::RefusalCode::MALFORMED,
          "\"" + proto::excerpt(posture, 40) +
              "\" is not a Codex posture; the vocabulary is "
              "untrusted, read-only, workspace-write, danger-full-access (on-request, on-failure "
              "and never are refused: they switch the approval seam off)");
    if (!started_) {
      // Before the session opens (Codex would refuse an empty thread id, and the answer must not
      // come before session.started): sent the moment it opens, before its first turn.
      std::int64_t id = ++next_id_;
      purposes_[id] = Purpose::control;
      deferred_settings_.emplace_back(id, std::move(settings));
      return ControlAck::pending("rpc:" + std::to_string(id), "the next turn boundary");
    }
    std::int64_t id = request(sink, "thread/settings/update", std::move(settings), Purpose::control);
    return ControlAck::pending("rpc:" + std::to_string(id), "the next turn boundary");
  }

  void end_session(AdapterSink& sink) override {
    // app-server ends on stdin EOF (which the run loop closes next) and kills its children then;
    // cleaning the background terminals first stops anything a turn left running.
    if (!thread_id_.empty())
      request(sink, "thread/backgroundTerminals/clean", json::object{{"threadId", thread_id_}}, Purpose::clean);
  }

  std::optional<proto::ev::SessionEnded> session_ended() const override {
    if (turns_completed_ == 0) return std::nullopt;
    proto::ev::SessionEnded e;
    if (last_status_ == "completed" && !last_answer_.empty())
      e.final_answer = proto::FinalAnswer{last_answer_, last_answer_turn_};
    if (last_status_ == "completed")
      e.is_error = false;
    else if (last_status_ == "failed")
      e.is_error = true;
    e.subtype = last_status_;
    e.terminal_reason = last_status_;
    e.api_error_status = last_http_status_;
    e.num_turns = turns_completed_;
    e.usage = total_usage_;
    return e;  // Codex keeps no denial list of its own: permission_denials stays null (unknown)
  }

 private:
  // --- JSON-RPC ------------------------------------------------------------------------------

  std::int64_t request(AdapterSink& sink, std::string_view method, json::object params, Purpose purpose) {
    std::int64_t id = ++next_id_;
    // Offline nothing is sent, and the transcript's ids are another run's: answers go by shape.
    if (!offline_) purposes_[id] = purpose;
    sink.write_vendor(
        proto::canonical_json(json::object{{"method", method}, {"id", id}, {"params", std::move(params)}}));
    return id;
  }

  // The agent a thread id names: none for the main thread (and for a record that names no
  // thread), else the sub-agent's own thread id (spawn_agent's agent_id).
  std::optional<std::string> agent_of(const std::string& thread) const {
    if (thread.empty() || thread_id_.empty() || thread == thread_id_) return std::nullopt;
    return thread;
  }

  static std::string deny_hook(const std::string& reason) {
    return proto::canonical_json(
        json::object{{"hookSpecificOutput", json::object{{"hookEventName", "PreToolUse"},
                                                         {"permissionDecision", "deny"},
                                                         {"permissionDecisionReason", reason}}}});
  }

  void opaque(AdapterSink& sink, std::optional<std::string> type, std::optional<std::string> subtype,
              std::string digest, std::uint64_t line_no, std::optional<std::string> at = std::nullopt) {
    sink.event(proto::ev::Opaque{std::move(type), std::move(subtype), std::move(digest), line_no}, std::move(at));
  }

  void response(const json::value& id, const json::object& m, std::string_view raw, std::uint64_t line_no,
                AdapterSink& sink) {
    std::optional<Purpose> purpose;
    if (auto number = proto::exact_int64(id)) {
      auto it = purposes_.find(*number);
      if (it != purposes_.end()) {
        purpose = it->second;
        purposes_.erase(it);
      }
    }
    const json::object* result = object_at(m, "result");
    const json::object* error = object_at(m, "error");
    std::string error_text = error ? string_at(*error, "message").value_or(proto::canonical_json(*error)) : "";
    // Offline (translate) nothing is known of our ids: recognise the answers that matter by
    // their shape.
    if (!purpose && result) {
      if (result->contains("userAgent"))
        purpose = Purpose::initialize;
      else if (result->contains("thread"))
        purpose = Purpose::thread_start;
      else if (offline_)
        purpose = evidence_purpose(*result);
    }
    if (!purpose) {
      opaque(sink, std::string("response"), std::nullopt, proto::sha256_hex(raw), line_no);
      return;
    }
    switch (*purpose) {
      case Purpose::initialize:
        if (error) {
          release_early_notifications(sink);
          sink.fail_run("codex refused initialize: " + error_text);
          return;
        }
        if (auto agent = string_at(*result, "userAgent")) {
          // "<client>/<codex version> (...)": the version is the token after the first '/'.
          auto slash = agent->find('/');
          auto space = agent->find(' ', slash == std::string::npos ? 0 : slash);
          if (slash != std::string::npos) version_ = agent->substr(slash + 1, space - slash - 1);
        }
        sink.write_vendor(proto::canonical_json(json::object{{"method", "initialized"}}));
        start_thread(sink);
        return;
      case Purpose::thread_start: {
        if (error) {
          release_early_notifications(sink);
          sink.fail_run("codex refused thread/start: " + error_text);
          return;
        }
        const json::object* thread = object_at(*result, "thread");
        if (thread) thread_id_ = string_at(*thread, "id").value_or("");
        thread_result_ = *result;
        // The thread's own MCP connections (not a second discovery of the configured servers).
        if (!offline_) ask_mcp_servers(sink, std::nullopt);
        maybe_open(sink);
        return;
      }
      case Purpose::account:
      case Purpose::plugins:
      case Purpose::config:
      case Purpose::mcp_servers:
        evidence_answered(*purpose, result, error_text, sink);
        return;
      case Purpose::turn_start:
        if (error) sink.fail_run("codex refused turn/start: " + error_text);
        return;
      case Purpose::control: {
        ControlReply reply;
        reply.control_id = "rpc:" + std::to_string(proto::exact_int64(id).value_or(-1));
        reply.ok = error == nullptr;
        reply.vendor_error = error_text;
        // "no active turn to interrupt/steer", "expected active turn id …": the window closed.
        if (error_text.find("active turn") != std::string::npos) reply.refusal_code = proto::RefusalCode::TOO_LATE;
        if (result) reply.response = *result;
        sink.control_answered(std::move(reply));
        return;
      }
      case Purpose::inject:
      case Purpose::clean:
      case Purpose::other:
        if (error)
          sink.event(proto::ev::Warning{"VENDOR_REFUSED", "codex refused a request of metaharness: " + error_text},
                     std::nullopt);
        return;
    }
  }

  // Under untrusted every command and patch waits for our approval, and an accepted one may be
  // re-run outside its sandbox when the sandbox refuses it. A deny-only run lets Codex's own
  // rules decide instead: under "never" nothing asks, the sandbox's refusal is final (an
  // escalation is rejected by Codex itself), and the PreToolUse hook carries the denials.
  std::string_view approval_policy() const { return deny_only_ ? "never" : "untrusted"; }

  void start_thread(AdapterSink& sink) {
    // approvalPolicy "untrusted" must be the per-thread parameter: as a config key this version
    // refuses it at start. bypass_hook_trust lets the hook run without a trust hash, per thread.
    request(sink, "thread/start",
            json::object{{"cwd", cwd_.string()},
                         {"approvalPolicy", approval_policy()},
                         {"sandbox", "workspace-write"},
                         {"config", json::object{{"bypass_hook_trust", true}}}},
            Purpose::thread_start);
    // What Codex says about its own surface, asked while the thread starts (each answers in a few
    // ms, thread/start in ~200 ms: measured on 0.171.0), so the first turn waits for nothing more
    // than the thread-scoped MCP list after it.
    ask_evidence(sink, "account/read", json::object{}, Purpose::account);
    ask_evidence(sink, "plugin/installed", json::object{{"cwds", json::array{cwd_.string()}}}, Purpose::plugins);
    ask_evidence(sink, "config/read", json::object{{"cwd", cwd_.string()}}, Purpose::config);
  }

  // --- the evidence session.started carries ---------------------------------------------------

  void ask_evidence(AdapterSink& sink, std::string_view method, json::object params, Purpose purpose) {
    ++evidence_pending_;
    request(sink, method, std::move(params), purpose);
  }

  void ask_mcp_servers(AdapterSink& sink, std::optional<std::string> cursor) {
    json::object params{{"threadId", thread_id_}, {"detail", "toolsAndAuthOnly"}};
    if (cursor) params["cursor"] = *cursor;
    ask_evidence(sink, "mcpServerStatus/list", std::move(params), Purpose::mcp_servers);
  }

  static std::string_view method_of(Purpose purpose) {
    switch (purpose) {
      case Purpose::account:
        return "account/read";
      case Purpose::plugins:
        return "plugin/installed";
      case Purpose::config:
        return "config/read";
      default:
        return "mcpServerStatus/list";
    }
  }

  // Offline only: the evidence answers by their shape.
  static std::optional<Purpose> evidence_purpose(const json::object& result) {
    if (result.contains("requiresOpenaiAuth")) return Purpose::account;
    if (result.contains("marketplaces")) return Purpose::plugins;
    if (result.contains("config")) return Purpose::config;
    if (result.contains("data") && result.contains("nextCursor")) return Purpose::mcp_servers;
    return std::nullopt;
  }

  static bool evidence_shaped(const json::object& m) {
    const json::object* result = object_at(m, "result");
    return result && !m.contains("method") && evidence_purpose(*result).has_value();
  }

  // One evidence answer. A refusal or an answer that does not say leaves its field null (unknown),
  // and says so after session.started; the answer itself is in the transcript.
  void evidence_answered(Purpose purpose, const json::object* result, const std::string& error_text,
                         AdapterSink& sink) {
    if (evidence_pending_ > 0) --evidence_pending_;
    std::string method(method_of(purpose));
    bool said = false;
    if (result && purpose == Purpose::account) {
      credential_source_ = credential_source(*result);
      said = credential_source_.has_value();
    } else if (result && purpose == Purpose::plugins) {
      plugins_ = installed_plugins(*result);
      said = plugins_.has_value();
    } else if (result && purpose == Purpose::config) {
      output_style_ = output_style(*result);
      said = output_style_.has_value();
    } else if (result) {
      if (auto page = mcp_server_page(*result)) {
        for (auto& server : page->servers)
          mcp_seen_.push_back(std::move(server));
        // A cursor Codex already gave is a list that does not end: no list.
        if (page->next_cursor && mcp_cursors_.insert(*page->next_cursor).second) {
          if (!offline_) ask_mcp_servers(sink, page->next_cursor);
          return;  // more pages follow (offline: their answers come next in the transcript)
        }
        said = !page->next_cursor;
        mcp_done_ = said;
      }
    }
    if (!said) {
      std::string field = purpose == Purpose::account   ? "credential_source"
                          : purpose == Purpose::plugins ? "plugins"
                          : purpose == Purpose::config  ? "output_style"
                                                        : "mcp_servers";
      if (purpose == Purpose::mcp_servers) mcp_failed_ = true;
      // The answer stays in the transcript; the stream says what it left unknown (after
      // session.started, which opens every stream).
      std::string note = (result ? "codex's answer to " + method + " does not say what metaharness reads from it"
                                 : "codex refused " + method + ": " + error_text) +
                         "; session.started." + field + " is null (unknown)";
      if (started_)
        sink.event(proto::ev::Warning{"VENDOR_REFUSED", std::move(note)}, std::nullopt);
      else
        evidence_notes_.push_back(std::move(note));
    }
    if (offline_ && purpose == Purpose::mcp_servers && thread_result_ && !started_) {
      open_session(sink, /*ready=*/true);
      return;
    }
    maybe_open(sink);
  }

  void maybe_open(AdapterSink& sink) {
    if (thread_result_ && !started_ && evidence_pending_ == 0 && !offline_) open_session(sink, /*ready=*/true);
  }

  // session.started, from thread/start's answer and the evidence, then what waited for it. A memory
  // file Codex reports loaded stops the run here, before its first turn, so the model never reads
  // it: the attestation then says H11 did not hold, and why.
  void open_session(AdapterSink& sink, bool ready) {
    started_ = true;
    const json::object& result = *thread_result_;
    const json::object* thread = object_at(result, "thread");
    proto::ev::SessionStarted s;
    s.adapter = "codex";
    s.adapter_class = proto::AdapterClass::harness;
    s.harness_version = version_.empty() ? std::nullopt : std::optional<std::string>(version_);
    s.session_id = thread_id_.empty() ? std::nullopt : std::optional<std::string>(thread_id_);
    s.model = string_at(result, "model");
    if (const json::value* policy = result.if_contains("approvalPolicy"))
      s.permission_mode = policy->is_string() ? std::string(policy->get_string()) : proto::canonical_json(*policy);
    s.cwd = string_at(result, "cwd");
    if (!s.cwd && thread) s.cwd = string_at(*thread, "cwd");
    s.credential_source = credential_source_;
    s.output_style = output_style_;
    s.plugins = plugins_;
    if (mcp_done_ && !mcp_failed_) s.mcp_servers = mcp_seen_;
    s.transcript = proto::TranscriptRef{transcript_, std::nullopt, std::nullopt};
    s.hermetic = attestation_;
    // Metaharness puts no instruction file anywhere (the run pins no input tree): every one Codex
    // reports loaded came from outside.
    std::vector<std::string> loaded_files = instruction_sources(result).value_or(std::vector<std::string>{});
    std::string loaded;
    for (const auto& path : loaded_files)
      loaded += (loaded.empty() ? "" : ", ") + path;
    if (!loaded_files.empty()) {
      std::erase_if(s.hermetic.imposed, [](const auto& r) { return r.row == proto::HermeticRow::h11; });
      s.hermetic.unavailable.push_back(
          {proto::HermeticRow::h11, "Codex reports loading " + loaded + " (thread/start instructionSources)"});
      std::sort(s.hermetic.unavailable.begin(), s.hermetic.unavailable.end(),
                [](const auto& x, const auto& y) { return x.row < y.row; });
    }
    model_ = s.model;
    sink.event(std::move(s), std::nullopt);
    for (const auto& note : evidence_notes_)
      sink.event(proto::ev::Warning{"VENDOR_REFUSED", note}, std::nullopt);
    for (auto& [deferred_id, settings] : deferred_settings_) {
      settings["threadId"] = thread_id_;
      sink.write_vendor(proto::canonical_json(
          json::object{{"method", "thread/settings/update"}, {"id", deferred_id}, {"params", std::move(settings)}}));
    }
    deferred_settings_.clear();
    release_early_notifications(sink);
    if (!loaded_files.empty()) {
      sink.fail_run("codex loaded a memory file metaharness did not put there: " + loaded +
                    " (thread/start instructionSources); the run stops before its first turn, so the model never "
                    "reads it");
      return;
    }
    if (ready) sink.session_ready();
  }

  void server_request(const std::string& method, const json::value& id, const json::object& params,
                      std::string_view raw, std::uint64_t line_no, AdapterSink& sink) {
    std::string token = "rpc-in:" + proto::canonical_json(id);
    if (method == "item/commandExecution/requestApproval" || method == "item/fileChange/requestApproval") {
      bool command = method == "item/commandExecution/requestApproval";
      ToolCall call;
      call.seam = proto::Seam::control_request;
      // A write into an escalated terminal carries the write's own call id as approvalId.
      call.call_id = string_at(params, "approvalId").value_or(string_at(params, "itemId").value_or(token));
      // A second approval for the same item is Codex asking to re-run it another way (outside
      // its sandbox after the sandbox refused it, "command failed; retry without sandbox?"): a
      // request of its own, decided on its own, never answered by the first one's decision.
      if (std::uint64_t asked = approvals_per_item_[call.call_id]++; asked > 0) {
        call.call_id += "/escalation-" + std::to_string(asked);
        call.escalation = true;
      }
      const json::value* reason = params.if_contains("reason");
      if (command) {
        bool write_stdin = string_at(params, "kind") == "writeStdin";
        call.name = write_stdin ? "write_stdin" : "Bash";
        call.input = json::object{{"command", params.contains("command") ? params.at("command") : json::value(nullptr)},
                                  {"cwd", params.contains("cwd") ? params.at("cwd") : json::value(nullptr)}};
        if (call.escalation || (reason && !reason->is_null()))
          call.input.get_object()["reason"] = reason ? *reason : nullptr;
      } else {
        call.name = "apply_patch";
        auto changes = file_changes_.find(call.call_id);
        call.input = json::object{{"changes", changes != file_changes_.end() ? changes->second : json::value(nullptr)}};
        if (call.escalation || (reason && !reason->is_null()))
          call.input.get_object()["reason"] = reason ? *reason : nullptr;
      }
      call.agent = agent_of(string_at(params, "threadId").value_or(""));
      approvals_[token] = id;
      sink.call_awaits_answer(std::move(call), ReplyToken{token, proto::Seam::control_request});
      return;
    }
    // Nothing this run configures asks for these (no MCP servers, no dynamic tools, no user to
    // ask): answer so Codex does not wait, refusing, and keep the record.
    json::object reply{{"id", id}};
    if (method == "mcpServer/elicitation/request")
      reply["result"] = json::object{{"action", "decline"}, {"content", nullptr}};
    else
      reply["error"] =
          json::object{{"code", -32000}, {"message", "metaharness does not serve " + method + " in a governed run"}};
    sink.write_vendor(proto::canonical_json(reply));
    opaque(sink, method, std::nullopt, proto::sha256_hex(raw), line_no);
  }

  // Notifications Codex sends before the thread exists (config warnings, remote-control status)
  // are held until session.started, so the stream opens with the session as it does for every
  // vendor; they keep their own source line and clock. A run that never gets a thread releases
  // them when it ends: nothing is dropped.
  void release_early_notifications(AdapterSink& sink) {
    session_open_ = true;
    auto held = std::move(early_);
    early_.clear();
    for (const auto& [raw, line_no] : held)
      if (auto v = proto::parse_json(raw); v && v->is_object()) read(v->get_object(), raw, line_no, sink);
  }

  void notification(const std::string& method, const json::object& m, const json::object& params, std::string_view raw,
                    std::uint64_t line_no, AdapterSink& sink) {
    if (!session_open_) {
      early_.emplace_back(std::string(raw), line_no);
      return;
    }
    auto at = at_of(m);
    const std::optional<std::string> agent = agent_of(string_at(params, "threadId").value_or(""));
    if (agent && (method == "turn/started" || method == "turn/completed")) {
      // A sub-agent's turn happens inside one of the main agent's turns; turn.* count the main
      // agent's turns only (a sub-agent's turn end closes nothing the run decides on).
      opaque(sink, method, std::nullopt, proto::sha256_hex(raw), line_no, at);
      return;
    }
    if (method == "turn/started") {
      if (const json::object* turn = object_at(params, "turn")) active_turn_ = string_at(*turn, "id").value_or("");
      answer_this_turn_.clear();
      sink.turn_started(at);
      return;
    }
    if (method == "turn/completed") {
      const json::object* turn = object_at(params, "turn");
      std::string status = turn ? string_at(*turn, "status").value_or("") : "";
      std::string turn_id = turn ? string_at(*turn, "id").value_or("") : "";
      ++turns_completed_;
      last_status_ = status;
      last_answer_ = answer_this_turn_;
      last_answer_turn_ = turn_id.empty() ? std::nullopt : std::optional<std::string>(turn_id);
      last_http_status_.reset();
      if (turn)
        if (const json::object* error = object_at(*turn, "error"))
          if (auto code = http_status(error->if_contains("codexErrorInfo"))) last_http_status_ = std::to_string(*code);
      if (turn_id == active_turn_) active_turn_.clear();
      sink.turn_ended(status.empty() ? std::nullopt : std::optional<std::string>(status), at);
      return;
    }
    if (method == "item/started" || method == "item/completed") {
      item(method == "item/started", params, agent, raw, line_no, at, sink);
      return;
    }
    if (method == "thread/tokenUsage/updated") {
      const json::object* usage = object_at(params, "tokenUsage");
      const json::object* last = usage ? object_at(*usage, "last") : nullptr;
      const json::object* total = usage ? object_at(*usage, "total") : nullptr;
      if (last) {
        sink.event(proto::ev::Usage{std::nullopt, model_, token_usage(*last)}, at);
        // The session's total is the main thread's; a sub-agent's spend shows in its usage events.
        if (total && !agent) total_usage_ = token_usage(*total);
        return;
      }
    }
    if (method == "account/rateLimits/updated") {
      const json::object* limits = object_at(params, "rateLimits");
      const json::object* primary = limits ? object_at(*limits, "primary") : nullptr;
      if (primary) {
        proto::RateLimitInfo info;
        info.window = string_at(*limits, "limitId");
        if (!info.window) info.window = string_at(*limits, "limitName");
        if (const json::value* used = primary->if_contains("usedPercent"); used && used->is_double())
          info.utilization = used->get_double();
        else if (auto whole = used ? proto::exact_int64(*used) : std::nullopt)
          info.utilization = static_cast<double>(*whole);
        if (const json::value* resets = primary->if_contains("resetsAt")) info.resets_at = proto::exact_int64(*resets);
        sink.event(proto::ev::RateLimit{info}, at);
        return;
      }
    }
    if (method == "error") {
      const json::object* error = object_at(params, "error");
      bool will_retry = false;
      if (const json::value* w = params.if_contains("willRetry"); w && w->is_bool()) will_retry = w->get_bool();
      if (error && http_status(error->if_contains("codexErrorInfo")) == 429u) {
        // Throttled (retried or final): the vendor's HTTP status. Codex names no window, no
        // utilization and no reset time on this notification, so those stay unknown.
        proto::RateLimitInfo info;
        info.status = "429";
        sink.event(proto::ev::RateLimit{info}, at);
        return;
      }
      if (error && !will_retry && http_status(error->if_contains("codexErrorInfo")) == 401u) {
        // The credential the run launched with stopped working: the vendor's own words.
        std::string detail = string_at(*error, "message").value_or("");
        if (auto more = string_at(*error, "additionalDetails"); more && !more->empty()) detail += " (" + *more + ")";
        sink.event(proto::ev::AuthExpired{credential_source_, detail, line_no}, at);
        return;
      }
    }
    if (method == "serverRequest/resolved") return;  // control traffic: the answer it confirms is recorded
    opaque(sink, method, std::nullopt, proto::sha256_hex(raw), line_no, at);
  }

  static proto::TokenUsage token_usage(const json::object& u) {
    proto::TokenUsage t;
    t.input_tokens = u64_at(u, {"inputTokens", "input_tokens"});
    t.output_tokens = u64_at(u, {"outputTokens", "output_tokens"});
    t.cache_read_input_tokens = u64_at(u, {"cachedInputTokens", "cached_input_tokens"});
    t.thinking_tokens = u64_at(u, {"reasoningOutputTokens", "reasoning_output_tokens"});
    return t;
  }

  void item(bool started, const json::object& params, const std::optional<std::string>& agent, std::string_view raw,
            std::uint64_t line_no, std::optional<std::string> at, AdapterSink& sink) {
    const json::object* item = object_at(params, "item");
    auto type = item ? string_at(*item, "type") : std::nullopt;
    auto id = item ? string_at(*item, "id") : std::nullopt;
    std::string method = started ? "item/started" : "item/completed";
    if (!item || !type || !id) {
      opaque(sink, method, type, proto::sha256_hex(raw), line_no, at);
      return;
    }
    auto field = [&](std::string_view k) { return item->contains(k) ? item->at(k) : json::value(nullptr); };
    auto presented = [&](ToolCall call) {
      call.agent = agent;
      sink.call_presented(std::move(call), at);
    };
    if (started) {
      // The vendor announces the call it is about to run: the call's presentation, if nothing
      // presented it before (the hook comes first for every kind it covers).
      if (*type == "commandExecution") {
        presented(ToolCall{*id, "Bash", json::object{{"command", field("command")}, {"cwd", field("cwd")}},
                           proto::Seam::control_request});
      } else if (*type == "fileChange") {
        file_changes_[*id] = field("changes");
        presented(
            ToolCall{*id, "apply_patch", json::object{{"changes", field("changes")}}, proto::Seam::control_request});
      } else if (*type == "imageView") {
        presented(ToolCall{*id, "view_image", json::object{{"path", field("path")}}, proto::Seam::hook});
      } else if (*type == "mcpToolCall") {
        std::string name =
            "mcp__" + string_at(*item, "server").value_or("") + "__" + string_at(*item, "tool").value_or("");
        presented(ToolCall{*id, name, field("arguments"), proto::Seam::hook});
      } else if (*type == "webSearch") {
        // Switched off at launch; should one appear, it is recorded as what it is: ungated.
        presented(ToolCall{*id, "web_search", field("query"), proto::Seam::none});
      } else {
        opaque(sink, method, type, proto::sha256_hex(raw), line_no, at);
      }
      return;
    }
    if (agent && (*type == "agentMessage" || *type == "reasoning")) {
      // A sub-agent's words are not the main agent's: text / thinking carry no agent, so they
      // are kept as what they are (and are never taken for the run's final answer).
      opaque(sink, method, type, proto::sha256_hex(raw), line_no, at);
    } else if (*type == "agentMessage") {
      std::string text = string_at(*item, "text").value_or("");
      answer_this_turn_ = text;
      sink.event(proto::ev::Text{std::move(text), std::nullopt}, at);
    } else if (*type == "reasoning") {
      std::string text;
      for (std::string_view key : {"summary", "content"})
        if (const json::value* parts = item->if_contains(key); parts && parts->is_array())
          for (const auto& p : parts->get_array()) {
            if (p.is_string())
              text += (text.empty() ? "" : "\n") + std::string(p.get_string());
            else if (p.is_object())
              if (auto t = string_at(p.get_object(), "text")) text += (text.empty() ? "" : "\n") + *t;
          }
      sink.event(proto::ev::Thinking{std::move(text), std::nullopt}, at);
    } else if (*type == "userMessage") {
      // Every user message on this thread is one metaharness sent: a turn's input (the prompt,
      // an injected message or frame text, already in the stream as injection where it was
      // put in) or a steer, which only shows here, once it has landed in the running turn.
      std::string text;
      if (const json::value* content = item->if_contains("content"); content && content->is_array())
        for (const auto& c : content->get_array())
          if (c.is_object())
            if (auto t = string_at(c.get_object(), "text")) text += (text.empty() ? "" : "\n") + *t;
      auto steer = std::find(steers_in_flight_.begin(), steers_in_flight_.end(), text);
      if (steer != steers_in_flight_.end()) {
        steers_in_flight_.erase(steer);
        sink.event(proto::ev::Injection{std::move(text), "steer"}, at);
      } else {
        opaque(sink, method, type, proto::sha256_hex(raw), line_no, at);
      }
    } else if (*type == "collabAgentToolCall") {
      // A sub-agent tool's outcome (spawn_agent, wait_agent, ...): which agents it reached and
      // their states, so a consumer can tie a later tool.requested.agent to the spawn that made it.
      proto::ev::ToolResult r;
      r.call_id = *id;
      r.outcome_source = "item/completed";
      auto status = string_at(*item, "status");
      if (status == "completed")
        r.is_error = false;
      else if (status == "failed")
        r.is_error = true;
      r.content = json::object{{"tool", field("tool")},
                               {"status", field("status")},
                               {"receiverThreadIds", field("receiverThreadIds")},
                               {"agentsStates", field("agentsStates")}};
      r.tool_use_result = nullptr;
      sink.event(std::move(r), at);
    } else if (*type == "commandExecution" || *type == "fileChange" || *type == "imageView" || *type == "mcpToolCall") {
      proto::ev::ToolResult r;
      r.call_id = *id;
      r.outcome_source = "item/completed";
      auto status = string_at(*item, "status");
      if (status == "completed")
        r.is_error = false;
      else if (status == "failed" || status == "declined")
        r.is_error = true;
      if (*type == "commandExecution") {
        if (const json::value* code = item->if_contains("exitCode")) r.exit_code = proto::exact_int64(*code);
        r.content = field("aggregatedOutput");
      } else if (*type == "mcpToolCall") {
        r.content = item->contains("result") ? item->at("result") : field("error");
      } else if (*type == "fileChange") {
        r.content = field("changes");
      }
      if (r.content.is_string()) r.bytes = r.content.get_string().size();
      r.tool_use_result = nullptr;
      sink.event(std::move(r), at);
    } else {
      opaque(sink, method, type, proto::sha256_hex(raw), line_no, at);
    }
  }

  std::filesystem::path cwd_;
  proto::HermeticAttestation attestation_;
  std::string transcript_;
  bool deny_only_ = false;
  bool offline_ = false;
  // Start-up: thread/start's answer and the evidence, until session.started is written.
  std::optional<json::object> thread_result_;
  bool started_ = false;
  std::size_t evidence_pending_ = 0;
  std::optional<std::string> credential_source_;
  std::optional<std::string> output_style_;
  std::optional<std::vector<proto::PluginRef>> plugins_;
  std::vector<proto::McpServerRef> mcp_seen_;
  std::set<std::string> mcp_cursors_;
  bool mcp_done_ = false;
  bool mcp_failed_ = false;
  std::vector<std::string> evidence_notes_;
  std::map<std::string, std::uint64_t> approvals_per_item_;               // item id -> approval requests seen
  std::vector<std::pair<std::int64_t, json::object>> deferred_settings_;  // permission.set before the thread
  std::int64_t next_id_ = 0;
  std::map<std::int64_t, Purpose> purposes_;
  std::map<std::string, json::value> approvals_;  // reply token -> the server request's id
  std::map<std::string, json::value> file_changes_;
  std::string version_;
  std::optional<std::string> model_;
  bool session_open_ = false;
  std::vector<std::pair<std::string, std::uint64_t>> early_;  // raw line, source line number
  std::string thread_id_;
  std::string active_turn_;
  std::deque<std::string> steers_in_flight_;  // sent with turn/steer, not yet seen in the thread
  std::uint64_t turns_completed_ = 0;
  std::string last_status_;
  std::string answer_this_turn_;
  std::string last_answer_;
  std::optional<std::string> last_answer_turn_;
  std::optional<std::string> last_http_status_;
  std::optional<proto::TokenUsage> total_usage_;
};

bool denied_vendor_env(std::string_view name, std::string& why) {
  static constexpr std::array<std::string_view, 8> kOwned = {"HOME",
                                                             "PATH",
                                                             "TMPDIR",
                                                             "CODEX_HOME",
                                                             "METAHARNESS_RUN",
                                                             "METAHARNESS_HOOK_SOCKET",
                                                             "METAHARNESS_HOOK_DEADLINE_S",
                                                             "METAHARNESS_MODEL_TOKEN"};
  for (auto k : kOwned)
    if (name == k) {
      why = std::string(name) + " is set by the launch plan itself and cannot be overridden";
      return true;
    }
  return false;
}

class CodexAdapter final : public Adapter {
 public:
  explicit CodexAdapter(HostConfig config) : config_(std::move(config)) {}

  std::string_view id() const override { return "codex"; }
  const proto::CapabilityTable& capabilities() const override { return codex::capabilities(); }

  std::filesystem::path binary() const {
    if (auto it = config_.binaries.find("codex"); it != config_.binaries.end()) return it->second;
    return default_binary(config_.vendor_dir);
  }

  std::filesystem::path hook_binary() const {
    if (auto it = config_.binaries.find("codex-hook"); it != config_.binaries.end()) return it->second;
    return {};
  }

  std::variant<LaunchPlan, LaunchRefusal> plan(const RunSpec& spec, const RunPaths& paths) const override {
    auto refuse = [](std::string message) { return LaunchRefusal{{}, std::move(message)}; };
    if (auto refused = refuse_unhonoured_commands(spec, capabilities()); !refused.empty())
      return LaunchRefusal{std::move(refused), "the run needs controls the codex adapter cannot honour"};
    if (spec.decisions == proto::DecisionMode::observe && spec.frame)
      return LaunchRefusal{
          {proto::ev::CommandResult{
              "start/tool.decide",
              proto::CommandOutcome::refused(
                  proto::RefusalCode::UNSUPPORTED_CONTROL,
                  "observe mode allows every call, so a frame would be told to the model and enforced by nothing; "
                  "use decisions frame (or ask) with a frame")}},
          "observe mode refuses a frame"};
    if (spec.prompt.empty()) return refuse("the run has no prompt");
    if (auto too_long = refuse_deadline(*this, spec.decision_deadline_ms)) return refuse(*too_long);
    if (!spec.model_endpoint)
      return refuse("no model endpoint: give a scripted scenario (--model-scenario) or an endpoint (--model-endpoint)");
    for (const auto& [name, value] : spec.vendor_env) {
      std::string why;
      if (denied_vendor_env(name, why)) return refuse("declared vendor environment refused: " + why);
    }
    for (const auto& [key, value] : spec.vendor_options) {
      if (!is_known_vendor_option(key))
        return refuse("unknown codex vendor option \"" + key + "\" (known: request_max_retries, stream_max_retries)");
      if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos)
        return refuse("codex vendor option " + key + " must be a non-negative integer, not \"" + value + "\"");
    }
    std::error_code ec;
    std::filesystem::path program = binary();
    if (!std::filesystem::is_regular_file(program, ec))
      return refuse("the pinned codex CLI is not at " + program.string() +
                    " (run ./run setup, or set METAHARNESS_CODEX_BIN / the config's codex binary)");
    std::filesystem::path hook = hook_binary();
    if (hook.empty() || !std::filesystem::is_regular_file(hook, ec))
      return refuse("the PreToolUse hook program mh-codex-hook is not at " +
                    (hook.empty() ? std::string("(unknown)") : hook.string()) +
                    " (it is built beside metaharness; set METAHARNESS_CODEX_HOOK_BIN or the config's codex_hook)");

    const std::filesystem::path scratch = std::filesystem::absolute(paths.scratch);
    const std::filesystem::path run_dir = std::filesystem::absolute(paths.run_dir);
    std::filesystem::path home = scratch / "home";
    std::filesystem::path codex_home = scratch / "codex-home";
    std::filesystem::path tmp = scratch / "tmp";
    std::filesystem::path work = spec.cwd ? std::filesystem::absolute(*spec.cwd) : scratch / "work";

    LaunchPlan p;
    p.adapter = "codex";
    p.program = program;
    p.args = {"app-server"};
    p.cwd = work;
    p.directories = {home, codex_home, tmp};
    if (!spec.cwd) p.directories.push_back(work);
    p.transcript_path = run_dir / "vendor-stdout.jsonl";
    p.stdin_log_path = run_dir / "vendor-stdin.jsonl";
    p.run_marker = {"METAHARNESS_RUN", spec.run_id};
    p.hook_channel = HookChannel{std::string(kHookSocketEnv), "@metaharness/hook/" + spec.run_id};

    // The hook must outlast the decision deadline (so a deny for silence is ours), and give up
    // before Codex's own hook timeout (which fails open).
    std::uint64_t deadline_s = (spec.decision_deadline_ms + 999) / 1000;
    std::uint64_t hook_gives_up_s = deadline_s + 20;
    std::uint64_t codex_timeout_s = deadline_s + 30;

    std::ostringstream toml;
    toml << "# Written by metaharness for run " << spec.run_id << ": one governed Codex run.\n"
         << "model = " << toml_string(spec.model.value_or(std::string(kDefaultModel))) << "\n"
         << "model_provider = \"metaharness\"\n"
         << "# Hosted web search runs on the provider's side, where nothing can gate it: off.\n"
         << "web_search = \"disabled\"\n"
         << "# The project root is the working directory itself: no AGENTS.md above it is read (by default\n"
         << "# Codex reads one in every directory from the git root down to the working directory).\n"
         << "project_root_markers = []\n\n"
         << "[features]\n"
         << "# No interactive TTY sessions: write_stdin, which no hook or approval sees, has nothing to write into.\n"
         << "unified_exec_tty = false\n\n"
         << "[model_providers.metaharness]\n"
         << "name = \"metaharness model endpoint\"\n"
         << "base_url = " << toml_string(spec.model_endpoint->base_url + "/v1") << "\n"
         << "wire_api = \"responses\"\n"
         << "env_key = \"" << kTokenEnv << "\"\n";
    for (const auto& [key, value] : spec.vendor_options)
      toml << key << " = " << value << "\n";
    toml << "\n# The project stays untrusted: no project rules or hooks can pre-approve anything, and Codex\n"
         << "# reads no AGENTS.md of it.\n"
         << "[projects." << toml_string(work.string()) << "]\n"
         << "trust_level = \"untrusted\"\n\n"
         << "[[hooks.PreToolUse]]\n"
         << "matcher = \"*\"\n"
         << "[[hooks.PreToolUse.hooks]]\n"
         << "type = \"command\"\n"
         << "command = " << toml_string(hook.string()) << "\n"
         << "timeout = " << codex_timeout_s << "\n";
    p.files.push_back(ScratchFile{codex_home / "config.toml", toml.str(), 0600});

    for (auto name : {"LANG", "LC_ALL", "TZ"})
      if (const char* v = std::getenv(name)) p.env.emplace_back(name, v);
    p.env.emplace_back("HOME", home.string());
    p.env.emplace_back("CODEX_HOME", codex_home.string());
    p.env.emplace_back("PATH", "/usr/local/bin:/usr/bin:/bin");
    p.env.emplace_back("TMPDIR", tmp.string());
    p.env.emplace_back(std::string(kTokenEnv), spec.model_endpoint->token);
    p.env.emplace_back(std::string(kHookSocketEnv), p.hook_channel->address);
    p.env.emplace_back(std::string(kHookDeadlineEnv), std::to_string(hook_gives_up_s));
    p.env.push_back(p.run_marker);
    for (const auto& [name, value] : spec.vendor_env)
      p.env.emplace_back(name, value);

    using proto::HermeticRow;
    auto& a = p.attestation;
    a.mode = spec.hermetic;
    a.deny_only = spec.deny_only;
    a.decisions = spec.decisions;
    a.imposed = {
        {HermeticRow::h1a, "CODEX_HOME=" + codex_home.string() + " (a fresh scratch home): no plugin, no rules/"},
        {HermeticRow::h2, "a fresh CODEX_HOME holds only metaharness's config.toml; the project is pinned untrusted"},
        {HermeticRow::h3,
         "environment constructed from an allowlist (LANG, LC_ALL, TZ passed through) plus HOME, "
         "CODEX_HOME, PATH, TMPDIR, the model token, the hook channel and the run marker"},
        {HermeticRow::h4,
         "no API key in the environment: a per-run bearer token for the configured model endpoint (env_key)"},
        {HermeticRow::h5, "config.toml configures no MCP server"},
        {HermeticRow::h6, "no credential file is copied: the model endpoint's per-run token is the only credential"},
        {HermeticRow::h8, "hooks run with their trust bypassed per thread (bypass_hook_trust), never skipped"},
        // Under an operator's --cwd too: Codex reads no AGENTS.md of an untrusted project (its own
        // or above it), and what it did load is checked before the first turn.
        {HermeticRow::h11,
         "the project " + work.string() +
             " is pinned untrusted, and Codex reads no AGENTS.md of an untrusted project; project_root_markers = [] "
             "keeps the project root at the working directory, so none above it is read either; the fresh "
             "CODEX_HOME holds none; and the run stops before its first turn if Codex reports loading any "
             "instruction file (thread/start instructionSources)"},
    };
    if (!spec.cwd)
      a.imposed.push_back({HermeticRow::h7, "working directory " + work.string() + " inside the run's scratch"});
    std::sort(a.imposed.begin(), a.imposed.end(), [](const auto& x, const auto& y) { return x.row < y.row; });
    if (spec.cwd) a.unavailable.push_back({HermeticRow::h7, "the operator named the working directory " + *spec.cwd});
    a.unavailable.push_back({HermeticRow::h9, "the plan runs no doctor; the version is read from initialize"});
    a.unavailable.push_back({HermeticRow::h10, "the run pins no input tree"});
    std::sort(a.unavailable.begin(), a.unavailable.end(), [](const auto& x, const auto& y) { return x.row < y.row; });
    if (spec.deny_only)
      a.ambient_inputs = {
          "deny-only: approval policy never; Codex's sandbox and rules decide every call the hook does not deny, "
          "and a sandbox refusal is final (Codex rejects escalations under never)",
          "deny-only: the PreToolUse hook is the only seam for shell commands and patches; mh-codex-hook denies "
          "on its own failures, but Codex fails open if the hook process itself crashes or times out",
          "no network isolation beyond Codex's own sandbox",
          "write_stdin is still offered to the model; with TTY sessions off it has nothing to write into"};
    else
      a.ambient_inputs = {
          "Codex re-runs an accepted command without its sandbox when the sandboxed attempt is denied, with no second "
          "approval (observed on 0.171.0): an allow overrides the read-only and workspace-write postures",
          "no network isolation beyond Codex's own sandbox",
          "write_stdin is still offered to the model; with TTY sessions off it has nothing to write into"};
    if (spec.decisions == proto::DecisionMode::observe)
      a.ambient_inputs.push_back("observe mode accepts every approval, and an accept on this wire grants");
    p.notes = {std::string("approval policy ") + (spec.deny_only ? "never (deny-only)" : "untrusted") +
               " per thread; hook timeout " + std::to_string(codex_timeout_s) +
               " s; the hook gives up (denying) after " + std::to_string(hook_gives_up_s) + " s"};
    return p;
  }

  std::unique_ptr<AdapterSession> open_session(const RunSpec& spec, const LaunchPlan& plan) const override {
    return std::make_unique<Session>(plan, spec.deny_only);
  }

  std::vector<proto::Event> translate(std::string_view transcript, const std::string& run_id) const override {
    LaunchPlan plan;
    Session session(plan, /*deny_only=*/false, /*offline=*/true);
    OfflineSink sink(*this, run_id);
    proto::LineFramer framer(proto::kDefaultMaxVendorLineBytes, /*digest_oversized=*/true);
    auto on_line = [&](const proto::FramedLine& line) { session.on_vendor_line(line, sink); };
    framer.feed(transcript, on_line);
    framer.finish(on_line);
    session.on_vendor_end(sink);
    return sink.finish(session.session_ended());
  }

  std::optional<std::string> installed_version(std::string& error) const override {
    std::filesystem::path manifest = config_.vendor_dir / "node_modules/@openai/codex/package.json";
    if (config_.binaries.count("codex")) {
      error = "the codex binary is overridden; its package manifest is unknown";
      return std::nullopt;
    }
    std::ifstream in(manifest);
    std::ostringstream ss;
    ss << in.rdbuf();
    auto v = proto::parse_json(ss.str());
    if (!v || !v->is_object() || !v->get_object().contains("version") || !v->get_object().at("version").is_string()) {
      error = "no readable package manifest at " + manifest.string();
      return std::nullopt;
    }
    return std::string(v->get_object().at("version").get_string());
  }

  // The bound is mh-codex-hook's, not Codex's. Measured on 0.171.0: Codex waits for an approval
  // indefinitely, and a hook `timeout` of 2^31 ms, 2^32 ms, even 1.8e13 s held a 3 s hook (it does
  // not overflow or fail at once). The hook program waits for the run's answer with poll(2),
  // whose timeout is an int of milliseconds, until the deadline + 20 s: that must stay within
  // 2^31 - 1 ms.
  std::uint64_t max_decision_deadline_ms() const override {
    constexpr std::uint64_t kPollMaxMs = 2'147'483'647;
    return (kPollMaxMs / 1000 - 20) * 1000;
  }

  // The plan writes the model into config.toml: a run that names none gets this one.
  std::optional<std::string> default_model() const override { return std::string(kDefaultModel); }

  std::vector<std::string> subjects_for(const ToolCall& call) const override {
    if (call.name == "apply_patch") return patch_subjects(call.input);
    return Adapter::subjects_for(call);
  }

  std::vector<proto::Operation> operations_for(const ToolCall& call) const override {
    auto ops = capabilities().operations_for_tool(call.name);
    if (call.name == "exec_command" || call.name == "write_stdin")
      ops.push_back(proto::Operation{proto::OpKind::shell, {}, {}});
    std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.op < b.op; });
    return ops;
  }

 private:
  HostConfig config_;
};

}  // namespace
}  // namespace codex

std::unique_ptr<Adapter> make_codex_adapter(const HostConfig& config) {
  return std::make_unique<codex::CodexAdapter>(config);
}

}  // namespace mh::adapters
