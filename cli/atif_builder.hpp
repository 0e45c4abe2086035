// The builder behind atif::trajectory, shared by the files that implement it:
// atif_trajectory.cpp (the two passes over the stream, and the small record helpers),
// atif_steps.cpp (a draft rendered as ATIF steps, tool calls and observations) and
// atif_final.cpp (the agent block, final_metrics and the main document). Internal to mh_atif.
#pragma once

#include <map>
#include <set>

#include "cli/atif_trajectory.hpp"

namespace mh::cli::atif::detail {

namespace json = boost::json;
namespace ev = protocol::ev;
using protocol::Event;

// How a vendor counts prompt tokens. ATIF's prompt_tokens includes cached tokens: Anthropic's
// input_tokens leaves out cache reads and cache writes, OpenAI's (Codex) includes cache reads.
enum class TokenWire { anthropic, openai, unknown };

json::array cut_array(const std::vector<protocol::CutField>& cut);
json::object payload_object(const Event& e, bool with_name);
json::object without(const json::object& o, std::initializer_list<std::string_view> keys);
bool rfc3339(std::string_view s);
std::optional<std::string> time_of(const Event& e);
std::string agent_name(std::string_view adapter);
const json::value* member(const json::value& v, std::string_view key);
std::optional<std::string> string_member(const json::value& v, std::string_view key);
std::string who_decided(protocol::DecidedBy by);

struct StepDraft {
  std::string source;  // user / system / agent
  std::vector<std::string> texts;
  std::vector<std::string> thinking;
  std::vector<std::string> call_ids;
  std::optional<std::string> request_id;
  const Event* usage = nullptr;
  std::optional<std::string> timestamp;
  json::array seqs;
  std::optional<std::uint32_t> turn;
  json::object extra;
  json::array cut;
  bool closed = false;                 // takes no more content: a result came, or a boundary
  std::vector<std::string> delegated;  // a system step announcing sub-agents no known call spawned
};

struct Draft {
  std::string agent_id;  // empty: the main agent
  std::vector<StepDraft> steps;
  std::optional<std::size_t> open;  // the agent step that may still take content
};

struct CallState {
  Draft* owner = nullptr;
  std::size_t step = 0;
  const Event* requested = nullptr;
  std::vector<const Event*> presentations;  // the same call_id presented again
  std::vector<const Event*> decisions;
  std::vector<const Event*> results;
};

class Builder {
 public:
  Builder(const std::vector<Event>& events, const Context& ctx) : events_(events), ctx_(ctx) {}

  json::object build();

 private:
  // The passes (atif_trajectory.cpp).
  void scan();
  void walk(const Event& e);
  void control(const Event& e);
  Draft& draft_of(const std::optional<std::string>& agent);
  static void close(Draft& d);
  void close_all();
  StepDraft& new_step(Draft& d, std::string source, const Event& e);
  void touched(Draft& d, std::size_t index);
  void content(const Event& e, const std::string& text, const std::optional<std::string>& rid, bool thinking);
  void injection(const Event& e, const ev::Injection& p);
  void requested(const Event& e, const ev::ToolRequested& p);
  void attach(const Event& e, const std::string& call_id, std::vector<const Event*> CallState::*list);
  void result(const Event& e, const ev::ToolResult& p);
  void usage(const Event& e, const ev::Usage& p);

  // Steps (atif_steps.cpp).
  std::optional<std::uint64_t> prompt_tokens(const protocol::TokenUsage& u) const;
  static json::value number_or_null(const std::optional<std::uint64_t>& v);
  static json::value real_or_null(const std::optional<double>& v);
  json::object metrics(const Event& e) const;
  static json::value message_of(const StepDraft& s);
  static std::pair<json::value, std::string> content_of(const ev::ToolResult& r);
  static json::object decided_object(const Event& e);
  json::object tool_call(const std::string& id) const;
  json::object observation_result(const std::string& id) const;
  json::object subagent_ref(const std::string& agent) const;
  json::object step(const StepDraft& s, std::size_t step_id) const;
  const Draft* parent_of(const std::string& agent) const;
  json::object render(const Draft& d) const;

  // The agent block and the final metrics (atif_final.cpp).
  // A sum over every request: one request of unknown size makes it unknown, and no request at
  // all is unknown too, never zero.
  struct Sum {
    double value = 0;
    bool known = true;
    void add(const std::optional<double>& v) {
      if (v)
        value += *v;
      else
        known = false;
    }
    json::value json(bool integral, bool any) const {
      if (!known || !any) return nullptr;
      return integral ? json::value(static_cast<std::uint64_t>(value)) : json::value(value);
    }
  };
  json::object agent_object(const std::optional<std::string>& agent_id) const;
  std::string stream_status() const;
  static std::optional<double> as_double(const std::optional<std::uint64_t>& v);
  json::object final_metrics() const;
  json::object render_main() const;

  const std::vector<Event>& events_;
  const Context& ctx_;

  const Event* started_ = nullptr;
  const Event* ended_ = nullptr;
  const Event* closed_ = nullptr;
  std::size_t closed_count_ = 0;
  std::string run_id_;
  std::string adapter_;
  TokenWire wire_ = TokenWire::unknown;
  std::optional<std::string> prompt_;
  bool prompt_step_ = false;
  std::set<std::string> user_injections_;
  std::set<std::string> vendor_denied_;
  std::vector<std::string> agent_order_;
  std::map<std::string, std::string> spawner_;             // sub-agent -> the call that spawned it
  std::map<std::string, std::vector<std::string>> tasks_;  // task text -> sub-agents given it

  Draft main_;
  std::map<std::string, Draft> subs_;  // node-stable: CallState points at drafts
  std::vector<std::string> sub_order_;
  std::map<std::string, CallState> calls_;
  std::optional<std::uint32_t> turn_;
  Draft* last_draft_ = nullptr;
  std::size_t last_step_ = 0;
  std::vector<const Event*> usage_events_;
  std::vector<std::optional<std::uint32_t>> usage_turns_;  // the turn each usage came in
  std::size_t usage_in_steps_ = 0;
  json::array control_;
};

}  // namespace mh::cli::atif::detail
