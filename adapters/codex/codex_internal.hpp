// The Codex adapter's parts, private to adapters/codex (codex_adapter.hpp is the public face):
//   codex_plan.cpp     the launch plan and the config.toml it writes;
//   codex_session.cpp  the JSON-RPC conversation with app-server: our request ids and what each
//                      answer is for, start-up and the evidence session.started carries, server
//                      requests (approvals), the hook channel, answers and controls;
//   codex_reader.cpp   notifications and items -> events, and what the session's end says.
#pragma once

#include <array>
#include <deque>

#include "adapters/adapter_outputs.hpp"
#include "adapters/codex/codex_adapter.hpp"
#include "adapters/registry.hpp"
#include "protocol/line_framer.hpp"

namespace mh::adapters {
class AdapterSession;  // session.hpp: of the codex units, only the session and the adapter need the seam
}  // namespace mh::adapters

namespace mh::adapters::codex {

inline constexpr std::string_view kDefaultModel = "gpt-5.5";  // a slug Codex knows: it offers apply_patch

// Approval policies that let commands run without asking: they would switch the seam off.
inline constexpr std::array<std::string_view, 3> kSeamOffPostures = {"on-request", "on-failure", "never"};
// The vendor_options a run may declare (config.toml keys, non-negative integers).
inline constexpr std::array<std::string_view, 2> kVendorOptions = {"request_max_retries", "stream_max_retries"};

std::variant<LaunchPlan, LaunchRefusal> make_plan(const Adapter& adapter, const HostConfig& config, const RunSpec& spec,
                                                  const RunPaths& paths);

// `offline`: the reader alone over a retained transcript (translate), where no request of ours is
// known and answers are recognised by their shape.
std::unique_ptr<AdapterSession> make_session(const LaunchPlan& plan, bool deny_only, bool offline);

inline void emit_opaque(AdapterOutputs& sink, std::optional<std::string> method, std::optional<std::string> item_type,
                        std::string digest, std::uint64_t line_no, std::optional<std::string> at = std::nullopt) {
  sink.event(proto::ev::Opaque{std::move(method), std::move(item_type), std::move(digest), line_no}, std::move(at));
}

// Notifications and items -> events. It knows which thread is the main agent's (any other is a
// sub-agent's), which turn is running, and what the session's end will say.
class Reader {
 public:
  // thread/start answered: this thread is the main agent's.
  void set_main_thread(std::string id) { main_thread_ = std::move(id); }
  const std::string& main_thread() const { return main_thread_; }
  // What usage events name as the model, and auth.expired as the credential (from session.started's
  // sources, once known).
  void set_model(std::optional<std::string> model) { model_ = std::move(model); }
  void set_credential_source(std::optional<std::string> source) { credential_source_ = std::move(source); }

  // The agent a thread id names: none for the main thread (and for a record that names no thread),
  // else the sub-agent's own thread id (spawn_agent's agent_id).
  std::optional<std::string> agent_of(const std::string& thread) const;

  // One notification (`m` the whole message, `params` its params or {}), once the session is open.
  void notification(const std::string& method, const json::object& m, const json::object& params, std::string_view raw,
                    std::uint64_t line_no, AdapterOutputs& sink);

  // The turn running now, empty between turns: what interrupt and steer act on.
  const std::string& active_turn() const { return active_turn_; }
  // A turn/steer was sent: its text is an injection once it lands in the running turn.
  void steer_sent(std::string text) { steers_in_flight_.push_back(std::move(text)); }
  // A patch's changes as item/started gave them (null until then): its approval restates none.
  json::value file_changes(const std::string& item) const;
  // Has the model's own function_call for this call id been read (rawResponseItem/completed,
  // which Codex sends before it runs the hook, starts the item or asks for an approval)?
  bool model_call_seen(const std::string& call_id) const { return model_calls_.count(call_id) > 0; }
  // What no hook input, item or approval restates: the model's own request to run a shell call
  // outside the sandbox (exec_command's sandbox_permissions and justification). Copies them into
  // the call's input, verbatim, and marks a require_escalated call escalation.
  void add_model_request(ToolCall& call) const;

  std::optional<proto::ev::SessionEnded> session_ended() const;

 private:
  void item(bool started, const json::object& params, const std::optional<std::string>& agent, std::string_view raw,
            std::uint64_t line_no, std::optional<std::string> at, AdapterOutputs& sink);

  std::string main_thread_;
  std::optional<std::string> model_;
  std::optional<std::string> credential_source_;
  std::map<std::string, json::value> file_changes_;  // item id -> its changes
  std::map<std::string, json::object> model_calls_;  // call id -> the escalation fields its arguments carry
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

}  // namespace mh::adapters::codex
