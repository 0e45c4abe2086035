// The client side of one ACP conversation (initialize, session/new, then one session/prompt per
// turn), as an adapter session's parts: what to send, and what each agent line means as outputs
// (AdapterOutputs). Generic over ACP agents: what is the vendor's own (its launch, its tool
// names rendered to operations, a call seam of its own besides permissions) stays in its folder,
// its profile (acp_profile.hpp) configuring the session every ACP vendor runs (acp_session.hpp).
//
//   - initialize declares no fs and no terminal capability; session/new gets the run's cwd and
//     no MCP servers; its answer opens the session (session.started, then SessionReady);
//   - each session/prompt is a turn: TurnStarted when sent, TurnEnded with the agent's stopReason
//     when answered, its usage a `usage` event (scope unsaid: see acp_client.cpp); a prompt
//     refused with an error that says the credential stopped working is auth.expired first
//     (a text match, as the reference's own detection is: ACP carries no HTTP status);
//   - session/update: message chunks -> text, thought chunks -> thinking, tool_call /
//     tool_call_update -> tool.result at completed/failed (correlated by toolCallId), usage_update
//     with tokens -> usage; anything else opaque;
//   - session/request_permission -> the call, presented and awaiting its answer (seam
//     control_request), answered allow_once for an allow and reject_once for anything else; an
//     "always" option is never selected;
//   - any other agent request (fs/*, terminal/*: capabilities we did not declare) -> a JSON-RPC
//     error, and the line is recorded opaque.
#pragma once

#include <set>

#include "adapters/acp/acp_seam_verdicts.hpp"
#include "adapters/acp/acp_updates.hpp"
#include "adapters/adapter_outputs.hpp"
#include "protocol/line_framer.hpp"

namespace mh::adapters::acp {

struct ClientOptions {
  ClientInfo info;
  std::string cwd;
  // The adapter's evidence for session.started (adapter, cwd, offered tools, attestation...); the
  // agent's session id and version are filled in from its answers.
  proto::ev::SessionStarted started;
  // The reader alone over a retained transcript (`metaharness translate`): our requests are not in
  // it, so an answer is known by its shape (initialize's protocolVersion, session/new's
  // sessionId, a prompt's stopReason or error) and a prompt's turn starts at its first update.
  bool offline = false;
  // The model the agent must have chosen from the adapter's config: a session/new answer whose
  // model config option says otherwise means the config was not read (an agent may then fall back
  // to a hosted default), and the run fails before its first prompt. Empty: not checked.
  std::string expected_model;
  // The tool a call id names (UpdateReader's ToolOfCall), for an agent whose tool calls name no
  // tool of their own; empty: a call is named by its first title.
  ToolOfCall tool_of_call;
};

class Client {
 public:
  explicit Client(ClientOptions options) : options_(std::move(options)), updates_(options_.tool_of_call) {}

  void start(AdapterOutputs& sink);
  void on_line(const proto::FramedLine& line, AdapterOutputs& sink);
  void on_end(AdapterOutputs& sink);

  // A decision for a permission request (`reply` as presented): allow -> allow_once, anything
  // else -> reject_once. A reply token that is not an open permission request is ignored. A
  // deny's reason has no place in the answer: the agent tells the model a text of its own, and
  // the run says so (warning DENY_REASON_NOT_DELIVERED) rather than let the reason vanish.
  void answer(const ReplyToken& reply, const proto::Decision& decision, AdapterOutputs& sink);
  // A permission answer carries no input: replace cannot be delivered through it.
  std::optional<proto::Refusal> check_decision(const proto::Decision& decision) const;

  // A turn: one session/prompt. False (nothing sent) before the session is open or while a
  // prompt is running: ACP has one prompt at a time.
  bool prompt(const std::vector<std::string>& texts, AdapterOutputs& sink);
  // session/cancel for the running prompt: pending until that prompt is answered (ok when it
  // says cancelled); refused TOO_LATE when no prompt runs. Open permission requests are answered
  // cancelled, as the spec requires, and withdrawn.
  ControlAck cancel(AdapterOutputs& sink);

  // An earlier call seam of the adapter's own (its profile's hook seam, acp_profile.hpp) has
  // presented this call (so its end is never recorded as a call nothing gated), then decided it.
  // ACP's permission request for it is the second gate, answered here without asking the run
  // again: allow_once where the seam granted the call (allow, or replace: what runs is the
  // replaced input), reject_once where it did not (abstain: under "ask" nobody else can grant it).
  // A call denied at the seam ends failed with the reason as its error: that end is its
  // tool.result, as on every other vendor (what the model was told; tool.decided says it never ran).
  // The second gate may come after the call's end: it is answered the same way (acp_seam_verdicts.hpp).
  using SeamVerdict = acp::SeamVerdict;
  void presented_at_seam(const std::string& call_id, const std::string& name, const json::value& input);
  void decided_at_seam(const std::string& call_id, SeamVerdict verdict);

  bool session_open() const { return !session_id_.empty(); }
  bool prompt_running() const { return running_prompt_.has_value(); }
  const std::string& session_id() const { return session_id_; }
  std::optional<proto::ev::SessionEnded> session_ended() const;

 private:
  enum class Purpose { initialize, session_new, prompt };
  // A new id of ours, remembered with what its answer is for.
  OurId next(Purpose purpose);
  void answered(const Answer& a, std::string_view raw, std::uint64_t line_no, AdapterOutputs& sink);
  // Offline: what an answer is for, from its shape; nullopt when it is none of ours.
  std::optional<Purpose> purpose_by_shape(const Answer& a) const;
  // Offline: the turn a transcript's prompt was, begun at its first sign (nothing is sent).
  void implicit_turn(AdapterOutputs& sink);
  void prompt_answered(const Answer& a, std::uint64_t line_no, AdapterOutputs& sink);
  void agent_request(const AgentRequest& r, std::string_view raw, std::uint64_t line_no, AdapterOutputs& sink);
  void permission(const AgentRequest& r, std::string_view raw, std::uint64_t line_no, AdapterOutputs& sink);
  void notification(const Notification& n, std::string_view raw, std::uint64_t line_no, AdapterOutputs& sink);

  ClientOptions options_;
  std::uint64_t next_id_ = 1;
  std::map<OurId, Purpose> pending_;
  std::string session_id_;
  std::optional<std::string> agent_version_;
  std::optional<OurId> running_prompt_;
  std::optional<std::string> cancel_control_;  // the interrupt waiting on the running prompt's answer
  std::uint64_t cancels_ = 0;
  struct OpenPermission {
    AgentId id;
    PermissionRequest request;
  };
  std::map<std::string, OpenPermission> permissions_;  // reply token id -> the agent's request
  SeamVerdicts seam_verdicts_;                         // call id -> what the earlier seam decided
  UpdateReader updates_;
  // What session.ended says.
  std::uint64_t turns_ = 0;
  std::optional<std::string> last_stop_reason_;
  bool last_prompt_failed_ = false;
  // The HTTP status of the model endpoint's refusal that failed the last prompt, when the agent
  // says it (Answer::http_status): session.ended's api_error_status, which the failure category of
  // stream.closed is judged from (429 rate_limit, 401/403 auth, 5xx upstream).
  std::optional<std::string> last_error_status_;
  std::optional<proto::TokenUsage> total_usage_;
  bool agent_gone_mid_prompt_ = false;
};

}  // namespace mh::adapters::acp
