#include "adapters/acp/acp_session.hpp"

#include "adapters/acp/acp_client.hpp"
#include "metaharness/build_info.hpp"

namespace mh::adapters::acp {

namespace {

using Verdict = Client::SeamVerdict;

ClientOptions client_options(const Profile& profile, const RunSpec& spec, const LaunchPlan& plan, bool offline) {
  ClientOptions o;
  o.offline = offline;
  o.info.version = std::string(build_info::version);
  o.cwd = plan.cwd.string();
  proto::ev::SessionStarted& s = o.started;
  s.adapter = profile.vendor;
  s.adapter_class = proto::AdapterClass::harness;
  if (!plan.adapter.empty()) {
    s.cwd = plan.cwd.string();
    s.transcript = proto::TranscriptRef{plan.transcript_path.string(), std::nullopt, std::nullopt};
  }
  s.hermetic = plan.attestation;
  if (profile.evidence) profile.evidence(spec, plan, o);
  return o;
}

class AcpSession final : public AdapterSession {
 public:
  AcpSession(const Profile& profile, ClientOptions options) : profile_(profile), client_(std::move(options)) {}

  void start(AdapterOutputs& sink) override { client_.start(sink); }
  void on_vendor_line(const proto::FramedLine& line, AdapterOutputs& sink) override { client_.on_line(line, sink); }
  void on_vendor_end(AdapterOutputs& sink) override { client_.on_end(sink); }

  // --- the vendor's hook seam ------------------------------------------------------------------

  void on_hook_request(std::uint64_t connection, const json::value& input, AdapterOutputs& sink) override {
    if (!profile_.hook_seam) {  // no seam of ours listens: the base answers nothing
      AdapterSession::on_hook_request(connection, input, sink);
      return;
    }
    auto read = profile_.hook_seam->read_request(input);
    if (auto* why = std::get_if<std::string>(&read)) {
      sink.reply_hook(connection, profile_.hook_seam->answer_line(proto::decision::Deny{*why}));
      return;
    }
    ToolCall& call = std::get<ToolCall>(read);
    client_.presented_at_seam(call.call_id, call.name, call.input);
    sink.call_awaits_answer(std::move(call), ReplyToken{.hook_connection = connection, .seam = proto::Seam::hook});
  }

  void on_hook_gone(std::uint64_t connection, AdapterOutputs& sink) override {
    sink.call_withdrawn(ReplyToken{.hook_connection = connection, .seam = proto::Seam::hook});
  }

  void answer(const ReplyToken& reply, const ToolCall& call, const proto::Decision& decision,
              AdapterOutputs& sink) override {
    if (!reply.hook_connection || !profile_.hook_seam) {  // a permission request the hook never saw
      client_.answer(reply, decision, sink);
      return;
    }
    Verdict verdict = std::holds_alternative<proto::decision::Deny>(decision)      ? Verdict::denied
                      : std::holds_alternative<proto::decision::Abstain>(decision) ? Verdict::not_granted
                                                                                   : Verdict::granted;
    client_.decided_at_seam(call.call_id, verdict);
    sink.reply_hook(*reply.hook_connection, profile_.hook_seam->answer_line(decision));
  }

  std::optional<proto::Refusal> check_decision(const ToolCall& call, const proto::Decision& decision) const override {
    if (call.seam == proto::Seam::control_request) return client_.check_decision(decision);
    if (auto* replace = std::get_if<proto::decision::Replace>(&decision);
        replace && !replace->input.is_object() && profile_.hook_seam &&
        !profile_.hook_seam->replace_needs_object.empty())
      return proto::Refusal{proto::RefusalCode::MALFORMED, profile_.hook_seam->replace_needs_object};
    return std::nullopt;
  }

  void send_user_turn(const std::vector<std::string>& texts, AdapterOutputs& sink) override {
    // The run loop starts a turn only at a boundary (the session open, no prompt running).
    if (!client_.prompt(texts, sink))
      sink.fail_run("a turn was due while " + profile_.vendor + "'s session was not ready for one");
  }

  ControlAck interrupt(AdapterOutputs& sink) override { return client_.cancel(sink); }

  ControlAck steer(const std::string&, AdapterOutputs&) override {
    return ControlAck::refused(proto::RefusalCode::UNSUPPORTED_CONTROL,
                               profile_.capabilities->refusal_reason(proto::CommandName::steer));
  }

  ControlAck set_permission(const std::string&, AdapterOutputs&) override {
    return ControlAck::refused(proto::RefusalCode::UNSUPPORTED_CONTROL,
                               profile_.capabilities->refusal_reason(proto::CommandName::permission_set));
  }

  // A prompt still running is cancelled first, so the agent stops its tools before its stdin closes.
  void end_session(AdapterOutputs& sink) override {
    if (client_.prompt_running()) (void)client_.cancel(sink);
  }

  std::optional<proto::ev::SessionEnded> session_ended() const override { return client_.session_ended(); }

 private:
  const Profile& profile_;  // a vendor's profile lives as long as the program (a static of its folder)
  Client client_;
};

}  // namespace

std::unique_ptr<AdapterSession> make_session(const Profile& profile, const RunSpec& spec, const LaunchPlan& plan,
                                             bool offline) {
  return std::make_unique<AcpSession>(profile, client_options(profile, spec, plan, offline));
}

}  // namespace mh::adapters::acp
