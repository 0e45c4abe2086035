// One stand-in process: the bidirectional stream-json session of Claude Code 2.1.197, played
// from a script. Single-threaded: poll() on stdin and a self-pipe for signals, with the next
// timer as poll's timeout, so an idle instance costs no CPU at all.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "tests/standin/records.hpp"
#include "tests/standin/script.hpp"
#include "tests/standin/tools.hpp"

namespace mh::standin {

// What the launch's argv says that the CLI itself would honour.
struct LaunchOptions {
  std::string permission_mode = "default";
  bool skip_permissions = false;  // --dangerously-skip-permissions
  std::optional<std::string> model;
};

class Session {
 public:
  Session(Script script, LaunchOptions launch, Records records);
  // Opt-in timing for benchmarks (MH_STANDIN_TIMING): for every answered hook_callback, one JSON
  // line {"call_id","asked_ns","answered_ns"} is appended to `fd`, both CLOCK_MONOTONIC: asked =
  // just before the write(2) of the call's tool_use assistant record (the moment a supervisor
  // can first see the call), answered = when the read(2) that brought the control_response
  // returned. A callback that times out gets {"call_id","asked_ns","timed_out":true}. The
  // session takes ownership of `fd`.
  void record_timing_to(int fd);
  // Runs until the session ends; returns the process exit status.
  int run(int signal_fd);

 private:
  using Clock = std::chrono::steady_clock;

  struct HookMatcher {
    bool matches_all = false;
    std::vector<std::string> tool_names;  // "Bash" or "Read|Write"
    std::vector<std::string> callback_ids;
    std::chrono::milliseconds timeout{600'000};  // the CLI's default when none is given
  };

  enum class Activity {
    running,       // moving through the steps (transient)
    hook_pending,  // a hook_callback awaits its control_response
    tool_running,  // an allowed tool is running (sleep): interruptible
    streaming,     // the "model" is producing (wait / idle): interruptible
    chattering,    // writing chatter records between polls
  };

  // The call currently going through the seam and then running.
  struct Call {
    json::object input;  // after any updatedInput
    std::vector<std::pair<std::string, std::chrono::milliseconds>> callbacks;
    std::size_t next_callback = 0;
    std::string request_id;  // of the outstanding hook_callback
    bool allowed = false;
    std::optional<std::string> denied;  // a hook's deny (or ask) reason
    ToolPlan plan;
    std::size_t next_action = 0;
    ToolOutput output;
  };

  struct Turn {
    std::size_t number = 0;  // 1-based
    std::vector<Step> steps;
    std::size_t next_step = 0;
    Clock::time_point started;
    std::string prompt_id;
    std::uint64_t api_messages = 0;
    bool message_open = false;
    std::string message_id, request_id;
    json::array denials;  // this turn's only: the CLI reports them per turn
    std::string last_text;
    Activity activity = Activity::running;
    std::optional<Clock::time_point> deadline;
    bool idle_until_eof = false;
    std::vector<ToolCallSpec> batch;
    std::vector<std::int64_t> asked_ns;  // per call of the batch (timing only)
    std::size_t call_index = 0;
    Call call;
    std::optional<json::object> deferred_result;  // tool_result(N), written after hook_callback(N+1)
    std::uint64_t chatter_left = 0, chatter_bytes = 0, chatter_written = 0;
    std::string chatter_template;  // one serialized record with text and uuid markers
  };

  // I/O
  void write(const json::object& record);
  void write_raw(std::string_view lines);
  void read_stdin();
  void on_line(std::string_view line);
  void on_signals(int signal_fd);

  // Host -> CLI
  void on_control_request(const std::string& id, const json::object& request);
  void on_control_response(const json::object& response);
  void on_initialize(const std::string& id, const json::object& request);
  void on_set_permission_mode(const std::string& id, const json::object& request);

  // Turns
  void pump();
  void start_turn();
  void advance();
  void open_message(bool continues);
  void end_turn_completed();
  void end_turn_api_error(const ApiErrorSpec& e);
  void end_turn_aborted(const std::string& terminal_reason, bool during_tool);
  void interrupt_turn(const std::string* control_id);
  void on_deadline();
  void write_chatter();

  // Calls
  void begin_call();
  void send_next_hook_or_decide();
  void on_hook_answer(const json::object& response);
  void decide();
  void continue_tool();
  void complete_call(json::object tool_result);
  void deny_call(const std::string& reason, bool listed_in_denials);
  void flush_deferred_result();
  bool vendor_permits(const ToolCallSpec& spec, const ToolPlan& plan) const;
  std::string vendor_refusal(const ToolCallSpec& spec) const;

  // Timing (MH_STANDIN_TIMING)
  void record_timing(bool timed_out);

  // Script effects outside the wire
  [[noreturn]] void crash(const Step& step);
  void spawn_background(const BackgroundSpec& spec);

  Script script_;
  LaunchOptions launch_;
  Records records_;
  std::string permission_mode_;
  bool initialized_ = false;
  std::vector<HookMatcher> pre_tool_use_;
  std::string stdin_buffer_;
  int timing_fd_ = -1;
  std::int64_t stdin_read_ns_ = 0;  // when the read(2) of the lines being handled returned
  bool stdin_eof_ = false;
  std::size_t queued_turns_ = 0;
  std::size_t turns_started_ = 0;
  std::optional<Turn> turn_;
  bool last_result_error_ = false;
  std::optional<int> exit_code_;
  std::uint64_t message_counter_ = 0;
  TurnUsage session_usage_;
};

}  // namespace mh::standin
