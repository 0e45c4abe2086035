// The JSON-RPC conversation with one `codex app-server` (codex 0.171.0; ../shared/reference/
// codex-wire.md §5, §9): our requests and what each answer is for, start-up and the evidence
// session.started carries, the server's requests (approvals), the hook channel, answers to
// decisions, and the controls. What its notifications say is the Reader's (codex_reader.cpp).
#include <algorithm>
#include <array>
#include <set>

#include "adapters/codex/codex_evidence.hpp"
#include "adapters/codex/codex_internal.hpp"
#include "adapters/hook_output.hpp"
#include "adapters/session.hpp"
#include "metaharness/build_info.hpp"
#include "protocol/digest.hpp"
#include "protocol/vendor_line.hpp"

namespace mh::adapters::codex {

namespace {

using proto::object_at;
using proto::string_at;

// Notifications that only restate, piece by piece, what an item/completed then says in full.
// Codex stops sending them when asked (optOutNotificationMethods), so nothing is dropped: the
// vendor never says it. Everything else it says is read.
constexpr std::array<std::string_view, 9> kOptOut = {
    "item/agentMessage/delta",  "item/reasoning/summaryTextDelta",   "item/reasoning/summaryPartAdded",
    "item/reasoning/textDelta", "item/commandExecution/outputDelta", "item/fileChange/outputDelta",
    "item/plan/delta",          "item/mcpToolCall/progress",         "thread/status/changed"};

// What the hook program prints for a decision: a deny with its reason, or nothing for allow and
// abstain (no opinion: the call runs).
std::string hook_reply(const proto::Decision& decision) {
  if (!std::holds_alternative<proto::decision::Deny>(decision)) return "";
  return proto::canonical_json(hook_output(decision));
}

// The sandbox a thread is started under (thread/start's `sandbox`, a permission.set posture name).
constexpr std::string_view kLaunchSandbox = "workspace-write";

// The sandbox thread/start's (or thread/resume's) answer reports, in permission.set's vocabulary:
// its `sandbox.type` (workspaceWrite -> workspace-write, readOnly -> read-only, dangerFullAccess ->
// danger-full-access; another type as Codex names it). nullopt: the answer says none.
std::optional<std::string> reported_sandbox(const json::object& result) {
  const json::value* sandbox = result.if_contains("sandbox");
  if (!sandbox) return std::nullopt;
  if (sandbox->is_string()) return std::string(sandbox->get_string());
  if (!sandbox->is_object()) return std::nullopt;
  std::optional<std::string> type = string_at(sandbox->get_object(), "type");
  if (!type) return proto::canonical_json(*sandbox);
  std::string kebab;
  for (char c : *type) {
    if (c >= 'A' && c <= 'Z') {
      kebab += '-';
      kebab += static_cast<char>(c - 'A' + 'a');
    } else {
      kebab += c;
    }
  }
  return kebab;
}

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

  void start(AdapterOutputs& sink) override {
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

  void on_vendor_line(const proto::FramedLine& line, AdapterOutputs& sink) override {
    auto classified = proto::classify_vendor_line(line);
    if (auto* opaque = std::get_if<proto::ev::Opaque>(&classified))
      sink.event(std::move(*opaque), std::nullopt);
    else if (auto* message = std::get_if<json::object>(&classified))
      read(*message, line.text, line.number, sink);
  }

  void read(const json::object& m, std::string_view raw, std::uint64_t line_no, AdapterOutputs& sink) {
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
      emit_opaque(sink, std::nullopt, std::nullopt, proto::sha256_hex(raw), line_no);
    }
  }

  void on_vendor_end(AdapterOutputs& sink) override {
    // A thread that started is recorded even if Codex went before answering all the evidence
    // requests (what it did not answer stays unknown); nothing is left to start a turn in.
    if (thread_result_ && !started_) open_session(sink, /*ready=*/false);
    release_early_notifications(sink);
  }

  // --- hooks ---------------------------------------------------------------------------------

  void on_hook_request(std::uint64_t connection, const json::value& input, AdapterOutputs& sink) override {
    const json::object* in = input.is_object() ? &input.get_object() : nullptr;
    auto tool = in ? string_at(*in, "tool_name") : std::nullopt;
    auto id = in ? string_at(*in, "tool_use_id") : std::nullopt;
    if (!in || !tool || !id) {
      sink.reply_hook(connection, hook_reply(proto::decision::Deny{
                                      "the hook input names no tool or no tool_use_id, so it cannot be governed"}));
      return;
    }
    ToolCall call{*id, *tool, in->contains("tool_input") ? in->at("tool_input") : json::value(nullptr),
                  proto::Seam::hook};
    // A sub-agent's hook input names the sub-agent (agent_id, its own thread id) beside the
    // root session_id; the main agent's names none.
    call.agent = reader_.agent_of(string_at(*in, "agent_id").value_or(""));
    reader_.add_model_request(call);
    if (!deny_only_ && (*tool == "Bash" || *tool == "apply_patch")) {
      // Shell commands and patches are decided at their approval, which always follows under
      // untrusted: the hook only announces the call (so it is delivered as early as possible)
      // and has no opinion. (Deny-only runs have no approvals: the hook decides every kind.)
      // A shell hook's input lacks what the model asked beyond the command (an escalation): a
      // shell call whose own function_call has not been read yet is presented by item/started
      // instead, which follows that record on Codex's stdout. (A patch asks for nothing of the
      // kind, and its hook input is the patch text as the model wrote it.)
      call.seam = proto::Seam::control_request;
      if (*tool == "apply_patch" || reader_.model_call_seen(call.call_id))
        sink.call_presented(std::move(call), std::nullopt);
      sink.reply_hook(connection, "");
      return;
    }
    sink.call_awaits_answer(std::move(call), ReplyToken{.hook_connection = connection, .seam = proto::Seam::hook});
  }

  void on_hook_gone(std::uint64_t connection, AdapterOutputs& sink) override {
    sink.call_withdrawn(ReplyToken{.hook_connection = connection, .seam = proto::Seam::hook});
  }

  // --- answering -----------------------------------------------------------------------------

  void answer(const ReplyToken& reply, const ToolCall& call, const proto::Decision& decision,
              AdapterOutputs& sink) override {
    if (reply.hook_connection) {
      sink.reply_hook(*reply.hook_connection, hook_reply(decision));
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
              {"threadId", call.agent.value_or(reader_.main_thread())},
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

  void send_user_turn(const std::vector<std::string>& texts, AdapterOutputs& sink) override {
    json::array input;
    for (const auto& t : texts)
      input.push_back(json::object{{"type", "text"}, {"text", t}});
    request(sink, "turn/start", json::object{{"threadId", reader_.main_thread()}, {"input", std::move(input)}},
            Purpose::turn_start);
  }

  ControlAck interrupt(AdapterOutputs& sink) override {
    if (reader_.active_turn().empty())
      return ControlAck::refused(proto::RefusalCode::TOO_LATE, "no turn is running; nothing to interrupt");
    std::int64_t id =
        request(sink, "turn/interrupt",
                json::object{{"threadId", reader_.main_thread()}, {"turnId", reader_.active_turn()}}, Purpose::control);
    // turn/interrupt ends the turn but leaves a running command running: clean them up too.
    request(sink, "thread/backgroundTerminals/clean", json::object{{"threadId", reader_.main_thread()}},
            Purpose::clean);
    return ControlAck::pending("rpc:" + std::to_string(id));
  }

  ControlAck steer(const std::string& text, AdapterOutputs& sink) override {
    if (reader_.active_turn().empty())
      return ControlAck::refused(proto::RefusalCode::TOO_LATE, "no turn is running to steer");
    std::int64_t id = request(sink, "turn/steer",
                              json::object{{"threadId", reader_.main_thread()},
                                           {"expectedTurnId", reader_.active_turn()},
                                           {"input", json::array{json::object{{"type", "text"}, {"text", text}}}}},
                              Purpose::control);
    reader_.steer_sent(text);
    return ControlAck::pending("rpc:" + std::to_string(id));
  }

  ControlAck set_permission(const std::string& posture, AdapterOutputs& sink) override {
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
    json::object settings{{"threadId", reader_.main_thread()}};
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

  // The thread is started under approval policy untrusted (never, deny-only) and sandbox
  // workspace-write (start_thread); permission.set moves one of the two (set_permission).
  std::optional<Posture> asked_posture() const override {
    return Posture{std::string(approval_policy()), std::string(kLaunchSandbox)};
  }
  Posture posture_of_set(const std::string& posture) const override {
    if (posture == "untrusted") return Posture{posture, std::nullopt};
    return Posture{std::nullopt, posture};
  }
  // thread/start's answer carries both the approval policy and the sandbox (open_session).
  bool reports_posture() const override { return true; }

  void end_session(AdapterOutputs& sink) override {
    // app-server ends on stdin EOF (which the run loop closes next) and kills its children then;
    // cleaning the background terminals first stops anything a turn left running.
    if (!reader_.main_thread().empty())
      request(sink, "thread/backgroundTerminals/clean", json::object{{"threadId", reader_.main_thread()}},
              Purpose::clean);
  }

  std::optional<proto::ev::SessionEnded> session_ended() const override { return reader_.session_ended(); }

 private:
  // --- JSON-RPC ------------------------------------------------------------------------------

  std::int64_t request(AdapterOutputs& sink, std::string_view method, json::object params, Purpose purpose) {
    std::int64_t id = ++next_id_;
    // Offline nothing is sent, and the transcript's ids are another run's: answers go by shape.
    if (!offline_) purposes_[id] = purpose;
    sink.write_vendor(
        proto::canonical_json(json::object{{"method", method}, {"id", id}, {"params", std::move(params)}}));
    return id;
  }

  void response(const json::value& id, const json::object& m, std::string_view raw, std::uint64_t line_no,
                AdapterOutputs& sink) {
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
      emit_opaque(sink, std::string("response"), std::nullopt, proto::sha256_hex(raw), line_no);
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
        if (thread) reader_.set_main_thread(string_at(*thread, "id").value_or(""));
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

  void start_thread(AdapterOutputs& sink) {
    // approvalPolicy "untrusted" must be the per-thread parameter: as a config key this version
    // refuses it at start. bypass_hook_trust lets the hook run without a trust hash, per thread.
    request(sink, "thread/start",
            json::object{{"cwd", cwd_.string()},
                         {"approvalPolicy", approval_policy()},
                         {"sandbox", kLaunchSandbox},
                         {"config", json::object{{"bypass_hook_trust", true}}},
                         // The model's own output items (rawResponseItem/completed): the only
                         // record of a call's sandbox_permissions and justification.
                         {"experimentalRawEvents", true}},
            Purpose::thread_start);
    // What Codex says about its own surface, asked while the thread starts (each answers in a few
    // ms, thread/start in ~200 ms: measured on 0.171.0), so the first turn waits for nothing more
    // than the thread-scoped MCP list after it.
    ask_evidence(sink, "account/read", json::object{}, Purpose::account);
    ask_evidence(sink, "plugin/installed", json::object{{"cwds", json::array{cwd_.string()}}}, Purpose::plugins);
    ask_evidence(sink, "config/read", json::object{{"cwd", cwd_.string()}}, Purpose::config);
  }

  // --- the evidence session.started carries ---------------------------------------------------

  void ask_evidence(AdapterOutputs& sink, std::string_view method, json::object params, Purpose purpose) {
    ++evidence_pending_;
    request(sink, method, std::move(params), purpose);
  }

  void ask_mcp_servers(AdapterOutputs& sink, std::optional<std::string> cursor) {
    json::object params{{"threadId", reader_.main_thread()}, {"detail", "toolsAndAuthOnly"}};
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
                         AdapterOutputs& sink) {
    if (evidence_pending_ > 0) --evidence_pending_;
    std::string method(method_of(purpose));
    bool said = false;
    if (result && purpose == Purpose::account) {
      credential_source_ = credential_source(*result);
      reader_.set_credential_source(credential_source_);
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

  void maybe_open(AdapterOutputs& sink) {
    if (thread_result_ && !started_ && evidence_pending_ == 0 && !offline_) open_session(sink, /*ready=*/true);
  }

  // session.started, from thread/start's answer and the evidence, then what waited for it. A memory
  // file Codex reports loaded stops the run here, before its first turn, so the model never reads
  // it: the attestation then says H11 did not hold, and why.
  void open_session(AdapterOutputs& sink, bool ready) {
    started_ = true;
    const json::object& result = *thread_result_;
    const json::object* thread = object_at(result, "thread");
    proto::ev::SessionStarted s;
    s.adapter = "codex";
    s.adapter_class = proto::AdapterClass::harness;
    s.harness_version = version_.empty() ? std::nullopt : std::optional<std::string>(version_);
    const std::string& thread_id = reader_.main_thread();
    s.session_id = thread_id.empty() ? std::nullopt : std::optional<std::string>(thread_id);
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
    reader_.set_model(s.model);
    std::optional<std::string> reported_mode = s.permission_mode;
    sink.event(std::move(s), std::nullopt);
    // The posture the thread runs under, as Codex reports it (issue 27 section 6).
    sink.posture_reported(Posture{std::move(reported_mode), reported_sandbox(result)}, "start");
    for (const auto& note : evidence_notes_)
      sink.event(proto::ev::Warning{"VENDOR_REFUSED", note}, std::nullopt);
    for (auto& [deferred_id, settings] : deferred_settings_) {
      settings["threadId"] = reader_.main_thread();
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
                      std::string_view raw, std::uint64_t line_no, AdapterOutputs& sink) {
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
        call.input = json::object{{"changes", reader_.file_changes(call.call_id)}};
        if (call.escalation || (reason && !reason->is_null()))
          call.input.get_object()["reason"] = reason ? *reason : nullptr;
      }
      call.agent = reader_.agent_of(string_at(params, "threadId").value_or(""));
      // The call's first approval, when the model asked to run it outside the sandbox
      // (require_escalated: Codex's reason is then the model's justification), is that escalation.
      if (!call.escalation) reader_.add_model_request(call);
      approvals_[token] = id;
      sink.call_awaits_answer(std::move(call), ReplyToken{.id = token, .seam = proto::Seam::control_request});
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
    emit_opaque(sink, method, std::nullopt, proto::sha256_hex(raw), line_no);
  }

  // Notifications Codex sends before the thread exists (config warnings, remote-control status)
  // are held until session.started, so the stream opens with the session as it does for every
  // vendor; they keep their own source line and clock. A run that never gets a thread releases
  // them when it ends: nothing is dropped.
  void release_early_notifications(AdapterOutputs& sink) {
    session_open_ = true;
    auto held = std::move(early_);
    early_.clear();
    for (const auto& [raw, line_no] : held)
      if (auto v = proto::parse_json(raw); v && v->is_object()) read(v->get_object(), raw, line_no, sink);
  }

  // Notifications Codex sends before the thread exists (config warnings, remote-control status)
  // are held until session.started (release_early_notifications), so the stream opens with the
  // session as it does for every vendor.
  void notification(const std::string& method, const json::object& m, const json::object& params, std::string_view raw,
                    std::uint64_t line_no, AdapterOutputs& sink) {
    if (!session_open_) {
      early_.emplace_back(std::string(raw), line_no);
      return;
    }
    reader_.notification(method, m, params, raw, line_no, sink);
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
  std::string version_;
  bool session_open_ = false;
  std::vector<std::pair<std::string, std::uint64_t>> early_;  // raw line, source line number
  Reader reader_;
};

}  // namespace

std::unique_ptr<AdapterSession> make_session(const LaunchPlan& plan, bool deny_only, bool offline) {
  return std::make_unique<Session>(plan, deny_only, offline);
}

}  // namespace mh::adapters::codex
