#include "adapters/opencode/opencode_session.hpp"

#include <map>

#include "adapters/acp/acp_client.hpp"
#include "adapters/opencode/opencode_adapter.hpp"
#include "adapters/opencode/opencode_plan.hpp"
#include "adapters/opencode/opencode_plugin.hpp"
#include "adapters/session.hpp"
#include "metaharness/build_info.hpp"

namespace mh::adapters::opencode {

namespace {

using Verdict = acp::Client::SeamVerdict;

acp::ClientOptions client_options(const RunSpec& spec, const LaunchPlan& plan, bool offline) {
  acp::ClientOptions o;
  o.offline = offline;
  o.info.version = std::string(build_info::version);
  o.cwd = plan.cwd.string();
  proto::ev::SessionStarted& s = o.started;
  s.adapter = "opencode";
  s.adapter_class = proto::AdapterClass::harness;
  if (spec.model_endpoint) {
    s.model = spec.model.value_or(std::string(kDefaultModel));
    o.expected_model = std::string(kProviderId) + "/" + *s.model;
  }
  if (!plan.adapter.empty()) {
    s.permission_mode = spec.deny_only ? "opencode defaults (deny-only)" : "ask";
    // ACP reports no credential: this is the plan's. As Claude's and Codex's "none" under the run's
    // endpoint, it names no API key (H4): the only credential is the per-run endpoint token,
    // which the generated provider config carries, and the scratch data dir holds no opencode login.
    s.credential_source = "none (the run's endpoint token only, in the generated provider config)";
    s.cwd = plan.cwd.string();
    // ACP reports no plugin list either: this is the plan's own, the seam plugin it installs and
    // declares in the attestation's installed_plugins (H1a reads the one against the other).
    s.plugins = std::vector<proto::PluginRef>{
        proto::PluginRef{std::string(kPluginName), std::string(kPluginFile), std::nullopt}};
    s.transcript = proto::TranscriptRef{plan.transcript_path.string(), std::nullopt, std::nullopt};
  }
  s.hermetic = plan.attestation;
  return o;
}

class OpencodeSession final : public AdapterSession {
 public:
  OpencodeSession(acp::ClientOptions options) : client_(std::move(options)) {}

  void start(AdapterOutputs& sink) override { client_.start(sink); }
  void on_vendor_line(const proto::FramedLine& line, AdapterOutputs& sink) override { client_.on_line(line, sink); }
  void on_vendor_end(AdapterOutputs& sink) override { client_.on_end(sink); }

  // --- the seam plugin -------------------------------------------------------------------------

  void on_hook_request(std::uint64_t connection, const json::value& input, AdapterOutputs& sink) override {
    auto read = read_seam_request(input);
    if (auto* why = std::get_if<std::string>(&read)) {
      sink.reply_hook(connection, seam_answer(proto::decision::Deny{*why}));
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
    if (!reply.hook_connection) {  // a permission request the plugin never saw
      client_.answer(reply, decision, sink);
      return;
    }
    Verdict verdict = std::holds_alternative<proto::decision::Deny>(decision)      ? Verdict::denied
                      : std::holds_alternative<proto::decision::Abstain>(decision) ? Verdict::not_granted
                                                                                   : Verdict::granted;
    client_.decided_at_seam(call.call_id, verdict);
    sink.reply_hook(*reply.hook_connection, seam_answer(decision));
  }

  std::optional<proto::Refusal> check_decision(const ToolCall& call, const proto::Decision& decision) const override {
    if (call.seam == proto::Seam::control_request) return client_.check_decision(decision);
    if (auto* replace = std::get_if<proto::decision::Replace>(&decision); replace && !replace->input.is_object())
      return proto::Refusal{proto::RefusalCode::MALFORMED,
                            "an opencode tool's arguments are a JSON object: replace needs an object input"};
    return std::nullopt;
  }

  void send_user_turn(const std::vector<std::string>& texts, AdapterOutputs& sink) override {
    // The run loop starts a turn only at a boundary (the session open, no prompt running).
    if (!client_.prompt(texts, sink)) sink.fail_run("a turn was due while opencode's session was not ready for one");
  }

  ControlAck interrupt(AdapterOutputs& sink) override { return client_.cancel(sink); }

  ControlAck steer(const std::string&, AdapterOutputs&) override {
    return ControlAck::refused(proto::RefusalCode::UNSUPPORTED_CONTROL,
                               capabilities().refusal_reason(proto::CommandName::steer));
  }

  ControlAck set_permission(const std::string&, AdapterOutputs&) override {
    return ControlAck::refused(proto::RefusalCode::UNSUPPORTED_CONTROL,
                               capabilities().refusal_reason(proto::CommandName::permission_set));
  }

  // A prompt still running is cancelled first, so opencode stops its tools before its stdin closes.
  void end_session(AdapterOutputs& sink) override {
    if (client_.prompt_running()) (void)client_.cancel(sink);
  }

  std::optional<proto::ev::SessionEnded> session_ended() const override { return client_.session_ended(); }

 private:
  acp::Client client_;
};

}  // namespace

std::unique_ptr<AdapterSession> make_session(const RunSpec& spec, const LaunchPlan& plan, bool offline) {
  return std::make_unique<OpencodeSession>(client_options(spec, plan, offline));
}

}  // namespace mh::adapters::opencode
