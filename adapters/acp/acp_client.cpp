#include "adapters/acp/acp_client.hpp"

#include <array>
#include <cctype>

#include "adapters/adapter_outputs.hpp"
#include "protocol/digest.hpp"
#include "protocol/json.hpp"
#include "protocol/vendor_line.hpp"

namespace mh::adapters::acp {

namespace {

using proto::object_at;
using proto::string_at;

void opaque(AdapterOutputs& sink, std::optional<std::string> method, std::optional<std::string> subtype,
            std::string_view raw, std::uint64_t line_no) {
  sink.event(proto::ev::Opaque{std::move(method), std::move(subtype), proto::sha256_hex(raw), line_no}, std::nullopt);
}

void add(std::optional<std::uint64_t>& total, const std::optional<std::uint64_t>& more) {
  if (more) total = total.value_or(0) + *more;
}

constexpr std::string_view kPermissionToken = "acp-permission:";

// What an agent's error says when the model endpoint refused the run's credential (as observed on
// a 401: "Internal error: <the endpoint's message>", errorName APIError). Lower case.
// Gemini CLI passes the endpoint's own error on (Google's UNAUTHENTICATED: "Request had invalid
// authentication credentials..."), with the HTTP status as the error's code.
constexpr std::array<std::string_view, 9> kCredentialWords = {
    "token has expired",    "token has been revoked", "invalid x-api-key",   "invalid api key",
    "authentication_error", "unauthorized",           "session has expired", "invalid authentication credentials",
    "unauthenticated"};

// The model a session/new answer says is chosen: a configOptions entry of category model, or
// (Gemini CLI 0.61.0, the spec's unstable session models) models.currentModelId.
std::optional<std::string> current_model(const json::object& result) {
  if (const json::value* options = result.if_contains("configOptions"); options && options->is_array())
    for (const auto& o : options->get_array())
      if (o.is_object() && string_at(o.get_object(), "category") == "model")
        return string_at(o.get_object(), "currentValue");
  if (const json::object* models = object_at(result, "models")) return string_at(*models, "currentModelId");
  return std::nullopt;
}

bool says_credential_stopped_working(std::string_view message) {
  std::string lower(message);
  for (char& c : lower)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (auto words : kCredentialWords)
    if (lower.find(words) != std::string::npos) return true;
  return false;
}

}  // namespace

OurId Client::next(Purpose purpose) {
  OurId id{next_id_++};
  pending_[id] = purpose;
  return id;
}

void Client::start(AdapterOutputs& sink) {
  sink.write_vendor(initialize_request(next(Purpose::initialize), options_.info));
}

bool Client::prompt(const std::vector<std::string>& texts, AdapterOutputs& sink) {
  if (!session_open() || running_prompt_) return false;
  running_prompt_ = next(Purpose::prompt);
  sink.write_vendor(session_prompt_request(*running_prompt_, session_id_, texts));
  sink.turn_started(std::nullopt);
  return true;
}

ControlAck Client::cancel(AdapterOutputs& sink) {
  if (!running_prompt_) return ControlAck::refused(proto::RefusalCode::TOO_LATE, "no prompt is running");
  if (cancel_control_) return ControlAck::pending(*cancel_control_);  // the same cancel, already on its way
  sink.write_vendor(session_cancel_notification(session_id_));
  for (auto& [token, open] : permissions_) {
    sink.write_vendor(permission_cancelled(open.id));
    sink.call_withdrawn(ReplyToken{.id = token, .seam = proto::Seam::control_request});
  }
  permissions_.clear();
  cancel_control_ = "acp-cancel-" + std::to_string(++cancels_);
  return ControlAck::pending(*cancel_control_);
}

void Client::on_line(const proto::FramedLine& line, AdapterOutputs& sink) {
  auto classified = proto::classify_vendor_line(line);
  if (auto* unreadable = std::get_if<proto::ev::Opaque>(&classified)) {
    sink.event(std::move(*unreadable), std::nullopt);
    return;
  }
  auto* message = std::get_if<json::object>(&classified);
  if (!message) return;  // a blank line says nothing
  auto read = classify(*message);
  if (auto* a = std::get_if<Answer>(&read))
    answered(*a, line.text, line.number, sink);
  else if (auto* n = std::get_if<Notification>(&read))
    notification(*n, line.text, line.number, sink);
  else if (auto* r = std::get_if<AgentRequest>(&read))
    agent_request(*r, line.text, line.number, sink);
  else
    opaque(sink, std::get<Unreadable>(read).method, std::nullopt, line.text, line.number);
}

void Client::answered(const Answer& a, std::string_view raw, std::uint64_t line_no, AdapterOutputs& sink) {
  auto it = pending_.find(a.id);
  std::optional<Purpose> found;
  if (it != pending_.end()) {
    found = it->second;
    pending_.erase(it);
  } else if (options_.offline) {
    found = purpose_by_shape(a);
  }
  if (!found) {
    opaque(sink, std::nullopt, "answer to no request of ours", raw, line_no);
    return;
  }
  Purpose purpose = *found;
  const json::object* result = a.result && a.result->is_object() ? &a.result->get_object() : nullptr;
  switch (purpose) {
    case Purpose::initialize: {
      if (!result) {
        sink.fail_run("the agent refused initialize: " +
                      (a.result ? "a result that is not an object" : a.error_message));
        return;
      }
      auto version = proto::u64_at(*result, "protocolVersion");
      if (version != kProtocolVersion) {
        sink.fail_run("the agent speaks ACP protocol version " +
                      (version ? std::to_string(*version) : std::string("(none)")) + "; this client speaks 1");
        return;
      }
      if (const json::object* info = object_at(*result, "agentInfo")) agent_version_ = string_at(*info, "version");
      sink.write_vendor(session_new_request(next(Purpose::session_new), options_.cwd));
      return;
    }
    case Purpose::session_new: {
      auto id = result ? string_at(*result, "sessionId") : std::nullopt;
      if (!id || id->empty() || id->size() > kMaxIdBytes) {
        sink.fail_run("the agent opened no session: " +
                      (a.result ? std::string("no sessionId (a short string) in its answer") : a.error_message));
        return;
      }
      if (auto chosen = current_model(*result);
          !options_.expected_model.empty() && chosen && *chosen != options_.expected_model) {
        sink.fail_run("the agent's session runs model " + proto::excerpt(*chosen, 80) + ", not the configured " +
                      options_.expected_model + ": its configuration was not read");
        return;
      }
      session_id_ = *id;
      proto::ev::SessionStarted started = options_.started;
      started.session_id = session_id_;
      started.harness_version = agent_version_;
      sink.event(std::move(started), std::nullopt);
      sink.session_ready();
      return;
    }
    case Purpose::prompt:
      if (options_.offline) implicit_turn(sink);
      prompt_answered(a, line_no, sink);
      return;
  }
}

std::optional<Client::Purpose> Client::purpose_by_shape(const Answer& a) const {
  const json::object* result = a.result && a.result->is_object() ? &a.result->get_object() : nullptr;
  if (!session_open()) {
    if (result && result->contains("protocolVersion")) return Purpose::initialize;
    if (result && result->contains("sessionId")) return Purpose::session_new;
    return std::nullopt;
  }
  if (!result || result->contains("stopReason")) return Purpose::prompt;
  return std::nullopt;
}

void Client::implicit_turn(AdapterOutputs& sink) {
  if (!options_.offline || !session_open() || running_prompt_) return;
  running_prompt_ = OurId{0};
  sink.turn_started(std::nullopt);
}

void Client::prompt_answered(const Answer& a, std::uint64_t line_no, AdapterOutputs& sink) {
  running_prompt_.reset();
  if (!a.result && says_credential_stopped_working(a.error_message))
    sink.event(proto::ev::AuthExpired{options_.started.credential_source, a.error_message, line_no}, std::nullopt);
  ++turns_;
  const json::object* result = a.result && a.result->is_object() ? &a.result->get_object() : nullptr;
  std::optional<std::string> stop = result ? string_at(*result, "stopReason") : std::nullopt;
  last_prompt_failed_ = !result;
  last_error_status_.reset();
  if (!result && a.http_status) last_error_status_ = std::to_string(*a.http_status);
  last_stop_reason_ = result ? stop : std::optional<std::string>("error: " + a.error_message);
  const json::object* reported = result ? object_at(*result, "usage") : nullptr;
  if (!reported && result)  // Gemini CLI 0.61.0: no usage, its quota's token_count in _meta
    if (const json::object* meta = object_at(*result, "_meta"))
      if (const json::object* quota = object_at(*meta, "quota")) reported = object_at(*quota, "token_count");
  if (const json::object* u = reported)
    if (auto usage = token_usage(*u)) {
      if (!total_usage_) total_usage_.emplace();
      add(total_usage_->input_tokens, usage->input_tokens);
      add(total_usage_->output_tokens, usage->output_tokens);
      add(total_usage_->cache_read_input_tokens, usage->cache_read_input_tokens);
      add(total_usage_->cache_creation_input_tokens, usage->cache_creation_input_tokens);
      add(total_usage_->thinking_tokens, usage->thinking_tokens);
      // Scope unsaid: an agent observed reports its last model request's figures here, not the
      // turn's sum (a two-request turn said 10/5 where the endpoint served 10/5 twice).
      sink.event(proto::ev::Usage{std::nullopt, std::nullopt, *usage, std::nullopt}, std::nullopt);
    }
  if (cancel_control_) {
    ControlReply reply{
        *cancel_control_, stop == "cancelled", {}, proto::RefusalCode::TOO_LATE, a.result ? *a.result : nullptr};
    if (!reply.ok)
      reply.vendor_error = "the prompt ended " + last_stop_reason_.value_or("(no stopReason)") + ", not cancelled";
    cancel_control_.reset();
    sink.control_answered(std::move(reply));
  }
  // Permission requests the prompt left open can no longer be answered into it.
  for (auto& [token, open] : permissions_)
    sink.call_withdrawn(ReplyToken{.id = token, .seam = proto::Seam::control_request});
  permissions_.clear();
  seam_verdicts_.turn_ended();
  sink.turn_ended(last_stop_reason_, std::nullopt);
}

void Client::presented_at_seam(const std::string& call_id, const std::string& name, const json::value& input) {
  if (OpenCall* call = updates_.track(call_id, name, "")) {
    call->name = name;  // the seam's name is the tool's id; a notice's title may be a command line
    call->input = input;
    call->presented = true;
  }
}

void Client::decided_at_seam(const std::string& call_id, SeamVerdict verdict) {
  seam_verdicts_.decided(call_id, verdict);
}

void Client::notification(const Notification& n, std::string_view raw, std::uint64_t line_no, AdapterOutputs& sink) {
  const json::object* update = object_at(n.params, "update");
  auto kind = update ? string_at(*update, "sessionUpdate") : std::nullopt;
  if (n.method == "session/update" && update && kind == "tool_call_update") {
    // A call's end does not close its seam verdict: its permission request may still come (it
    // can trail the end), and must be answered as the seam decided, not presented again.
    auto id = string_at(*update, "toolCallId");
    auto status = string_at(*update, "status");
    if (id && (status == "failed" || status == "completed")) seam_verdicts_.ended(*id);
  }
  if (n.method == "session/update" && string_at(n.params, "sessionId") == session_id_) implicit_turn(sink);
  if (n.method != "session/update" || !update || string_at(n.params, "sessionId") != session_id_ || !session_open() ||
      !updates_.read(*update, sink))
    opaque(sink, n.method, kind, raw, line_no);
}

void Client::agent_request(const AgentRequest& r, std::string_view raw, std::uint64_t line_no, AdapterOutputs& sink) {
  implicit_turn(sink);
  if (r.method == "session/request_permission") {
    permission(r, raw, line_no, sink);
    return;
  }
  // fs/read_text_file, fs/write_text_file, terminal/*: capabilities this client did not declare;
  // anything else: a method a client does not have. Answered, so the agent does not wait, and kept.
  bool undeclared = r.method.starts_with("fs/") || r.method.starts_with("terminal/");
  sink.write_vendor(error_answer(r.id, kMethodNotFound,
                                 undeclared ? r.method + ": the client declared no such capability in initialize"
                                            : r.method + ": no such client method"));
  opaque(sink, r.method, std::nullopt, raw, line_no);
}

void Client::permission(const AgentRequest& r, std::string_view raw, std::uint64_t line_no, AdapterOutputs& sink) {
  auto read = read_permission_request(r.params);
  if (auto* why = std::get_if<std::string>(&read)) {
    // Not a request we can present: refuse it (the agent does not run the call) and keep it.
    sink.write_vendor(error_answer(r.id, kInvalidParams, "session/request_permission refused: " + *why));
    opaque(sink, r.method, "refused: " + *why, raw, line_no);
    return;
  }
  auto& request = std::get<PermissionRequest>(read);
  std::string token = std::string(kPermissionToken) + r.id.key();
  if (request.session_id != session_id_ || !running_prompt_ || permissions_.count(token)) {
    // Another session's, outside any prompt, or an id still open: nothing to decide it in.
    sink.write_vendor(permission_cancelled(r.id));
    opaque(sink, r.method, "outside the running prompt", raw, line_no);
    return;
  }
  if (auto verdict = seam_verdicts_.find(request.tool_call_id)) {
    // The second gate of a call the earlier seam decided: answered at once, never asked again,
    // before or after the call's end.
    bool granted = *verdict == SeamVerdict::granted;
    auto option = request.option_of_kind(granted ? "allow_once" : "reject_once");
    sink.write_vendor(option ? permission_selected(r.id, *option) : permission_cancelled(r.id));
    opaque(sink, r.method,
           granted ? "the second gate of a call granted at the seam: allow_once"
                   : "the second gate of a call the seam did not grant: reject_once",
           raw, line_no);
    return;
  }
  OpenCall* call = updates_.find(request.tool_call_id);
  std::string name =
      updates_.tool_name(request.tool_call_id, request.title.value_or("unknown"), object_at(r.params, "toolCall"));
  if (!call) call = updates_.track(request.tool_call_id, name, request.kind.value_or(""));
  ToolCall presented{request.tool_call_id, call ? call->name : name,
                     request.raw_input.is_null() && call ? call->input : request.raw_input,
                     proto::Seam::control_request};
  if (call) call->presented = true;
  permissions_[token] = OpenPermission{r.id, std::move(request)};
  sink.call_awaits_answer(std::move(presented), ReplyToken{.id = token, .seam = proto::Seam::control_request});
}

void Client::answer(const ReplyToken& reply, const proto::Decision& decision, AdapterOutputs& sink) {
  auto it = permissions_.find(reply.id);
  if (it == permissions_.end()) return;
  OpenPermission open = std::move(it->second);
  permissions_.erase(it);
  bool allow = std::holds_alternative<proto::decision::Allow>(decision);
  auto option = open.request.option_of_kind(allow ? "allow_once" : "reject_once");
  if (!option && allow) {
    // An allow with no once-only option to carry it: reject rather than grant a standing rule.
    sink.event(proto::ev::Warning{"ALLOW_NOT_DELIVERABLE", "the agent offered no allow_once option for " +
                                                               open.request.tool_call_id +
                                                               "; rejected instead of selecting an always option"},
               std::nullopt);
    option = open.request.option_of_kind("reject_once");
  }
  if (auto* deny = std::get_if<proto::decision::Deny>(&decision); deny && !deny->reason.empty())
    sink.event(proto::ev::Warning{"DENY_REASON_NOT_DELIVERED",
                                  "an ACP permission answer carries no reason: " + open.request.tool_call_id +
                                      " was rejected, and the agent tells the model a text of its own instead of: " +
                                      proto::excerpt(deny->reason, 200)},
               std::nullopt);
  sink.write_vendor(option ? permission_selected(open.id, *option) : permission_cancelled(open.id));
}

std::optional<proto::Refusal> Client::check_decision(const proto::Decision& decision) const {
  if (std::holds_alternative<proto::decision::Replace>(decision))
    return proto::Refusal{proto::RefusalCode::UNSUPPORTED_CONTROL,
                          "an ACP permission answer selects an option and carries no input: replace cannot be "
                          "delivered through it"};
  return std::nullopt;
}

void Client::on_end(AdapterOutputs& sink) {
  if (running_prompt_) {
    agent_gone_mid_prompt_ = true;
    running_prompt_.reset();
    for (auto& [token, open] : permissions_)
      sink.call_withdrawn(ReplyToken{.id = token, .seam = proto::Seam::control_request});
    permissions_.clear();
    sink.turn_ended(std::string("agent ended"), std::nullopt);
  }
}

std::optional<proto::ev::SessionEnded> Client::session_ended() const {
  if (!session_open()) return std::nullopt;
  proto::ev::SessionEnded e;
  e.num_turns = turns_;
  e.stop_reason = agent_gone_mid_prompt_ ? std::optional<std::string>("agent ended") : last_stop_reason_;
  e.is_error = agent_gone_mid_prompt_ || last_prompt_failed_;
  if (!agent_gone_mid_prompt_) e.api_error_status = last_error_status_;
  e.usage = total_usage_;
  return e;
}

}  // namespace mh::adapters::acp
