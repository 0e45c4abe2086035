#include "tests/standin/session.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>

namespace mh::standin {

namespace {

// The real CLI's words (captured; see the README for where each comes from).
constexpr std::string_view kRejectedToolUse =
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it "
    "was a file edit, the new_string was NOT written to the file). STOP what you are doing and "
    "wait for the user to tell you how to proceed.";
constexpr std::string_view kHookTimedOut =
    "The user doesn't want to take this action right now. STOP what you are doing and wait for "
    "the user to tell you how to proceed.";
constexpr std::string_view kBypassRefused =
    "Cannot set permission mode to bypassPermissions because the session was not launched with "
    "--dangerously-skip-permissions";
constexpr std::string_view kInterruptedForTool = "[Request interrupted by user for tool use]";
constexpr std::string_view kInterrupted = "[Request interrupted by user]";

// Subtypes the 2.1.197 binary dispatches that the stand-in does not emulate: they get an error
// that says so, rather than the CLI's "Unsupported" (which would be a lie about the real CLI).
// clang-format off
constexpr std::string_view kRealButNotEmulated[] = {
    "mcp_call", "mcp_message", "mcp_set_servers", "mcp_reconnect", "mcp_toggle",
    "mcp_authenticate", "mcp_clear_auth", "mcp_oauth_callback_url", "get_context_usage",
    "get_settings", "get_usage", "get_session_cost", "generate_session_title", "side_question",
    "stop_task", "background_tasks", "cancel_async_message", "rewind_files", "rewind_conversation",
    "seed_read_state", "read_file", "file_suggestions", "reload_plugins", "reload_skills",
    "add_directory", "register_repo_root", "stage_file", "channel_enable", "remote_control",
    "set_mcp_permission_mode_override", "message_rated", "submit_feedback", "ultrareview_launch",
    "claude_authenticate", "claude_oauth_callback", "claude_oauth_wait_for_completion",
    "oauth_token_refresh", "host_auth_token_refresh"};
// clang-format on

// CLOCK_MONOTONIC in ns: the clock a benchmark on the same machine compares these stamps with.
std::int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

constexpr std::string_view kKnownModes[] = {"acceptEdits", "auto", "bypassPermissions", "default", "dontAsk", "plan"};

std::string string_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

std::vector<std::string> split_alternatives(const std::string& matcher) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    std::size_t bar = matcher.find('|', start);
    out.push_back(matcher.substr(start, bar == std::string::npos ? bar : bar - start));
    if (bar == std::string::npos) return out;
    start = bar + 1;
  }
}

struct ApiErrorWords {
  std::string error;  // the assistant record's top-level "error"
  std::string text;
  bool retried;
};

// What the CLI says for a persistent API failure (reference §6 and FINDINGS g).
ApiErrorWords api_error_words(const ApiErrorSpec& e) {
  switch (e.status) {
    case 401:
      return {"authentication_failed", "Failed to authenticate. API Error: 401 " + e.message, true};
    case 429:
      return {"rate_limit", "API Error: Request rejected (429) \u00b7 rate limited", true};
    case 529:
      return {"server_error",
              "API Error: 529 Overloaded. This is a server-side issue, usually temporary \u2014 "
              "try again in a moment.",
              true};
    case 400:
    case 402:
    case 403:
      return {"billing_error", "Credit balance is too low", false};
    default:
      if (e.status >= 500) return {"server_error", "API Error: " + std::to_string(e.status) + " " + e.message, true};
      return {"unknown", "API Error: " + std::to_string(e.status) + " " + e.message, false};
  }
}

}  // namespace

Session::Session(Script script, LaunchOptions launch, Records records)
    : script_(std::move(script)),
      launch_(std::move(launch)),
      records_(std::move(records)),
      permission_mode_(launch_.skip_permissions ? "bypassPermissions" : launch_.permission_mode) {}

// ---------------------------------------------------------------------------------------------
// I/O
// ---------------------------------------------------------------------------------------------

void Session::write(const json::object& record) {
  std::string line = json::serialize(record);
  line.push_back('\n');
  write_raw(line);
}

void Session::write_raw(std::string_view rest) {
  while (!rest.empty()) {
    ssize_t n = ::write(STDOUT_FILENO, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    // Whoever read our stdout is gone: nothing we do can be observed any more.
    if (n <= 0) ::_exit(1);
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}

void Session::record_timing_to(int fd) {
  if (timing_fd_ >= 0) ::close(timing_fd_);
  timing_fd_ = fd;
}

void Session::record_timing(bool timed_out) {
  if (timing_fd_ < 0 || !turn_) return;
  const Turn& t = *turn_;
  json::object line{{"call_id", t.batch[t.call_index].id},
                    {"asked_ns", t.call_index < t.asked_ns.size() ? t.asked_ns[t.call_index] : 0}};
  if (timed_out)
    line["timed_out"] = true;
  else
    line["answered_ns"] = stdin_read_ns_;
  std::string text = json::serialize(line);
  text.push_back('\n');
  // One O_APPEND write per call, after the answer was read: outside the timed window. A failed
  // write only loses timing, never the session.
  [[maybe_unused]] ssize_t n = ::write(timing_fd_, text.data(), text.size());
}

int Session::run(int signal_fd) {
  while (!exit_code_) {
    int timeout_ms = -1;  // nothing scheduled: sleep in poll until stdin or a signal
    if (turn_ && turn_->activity == Activity::chattering) {
      timeout_ms = 0;
    } else if (turn_ && turn_->deadline) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*turn_->deadline - Clock::now()).count();
      timeout_ms = static_cast<int>(std::clamp<long long>(left, 0, 24LL * 3600 * 1000));
    }
    pollfd fds[2] = {{signal_fd, POLLIN, 0}, {stdin_eof_ ? -1 : STDIN_FILENO, POLLIN, 0}};
    int ready = ::poll(fds, 2, timeout_ms);
    if (ready < 0 && errno != EINTR) {
      std::cerr << "mh-standin-claude: poll: " << std::strerror(errno) << "\n";
      return 1;
    }
    if (ready > 0 && fds[0].revents) on_signals(signal_fd);
    if (!exit_code_ && ready > 0 && fds[1].revents) read_stdin();
    if (!exit_code_ && turn_ && turn_->deadline && Clock::now() >= *turn_->deadline) on_deadline();
    if (!exit_code_ && turn_ && turn_->activity == Activity::chattering) write_chatter();
    if (!exit_code_) pump();
  }
  return *exit_code_;
}

void Session::read_stdin() {
  char buf[64 * 1024];
  ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
  if (timing_fd_ >= 0) stdin_read_ns_ = monotonic_ns();
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    stdin_eof_ = true;
    // A trailing line without its newline still counts.
    if (!stdin_buffer_.empty()) {
      std::string last = std::move(stdin_buffer_);
      stdin_buffer_.clear();
      on_line(last);
    }
    // An idle step waits for stdin; with stdin gone the turn simply completes.
    if (turn_ && turn_->idle_until_eof) {
      turn_->idle_until_eof = false;
      turn_->activity = Activity::running;
    }
    return;
  }
  stdin_buffer_.append(buf, static_cast<std::size_t>(n));
  std::size_t start = 0;
  for (;;) {
    std::size_t nl = stdin_buffer_.find('\n', start);
    if (nl == std::string::npos) break;
    on_line(std::string_view(stdin_buffer_).substr(start, nl - start));
    start = nl + 1;
    if (exit_code_) return;
    // Settle the turn before the next line, so what a line meets never depends on how the
    // host's writes were split into reads (the stand-in behaves as an infinitely fast CLI).
    pump();
    if (exit_code_) return;
  }
  stdin_buffer_.erase(0, start);
}

void Session::on_line(std::string_view line) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
  boost::system::error_code ec;
  json::value v = json::parse(line, ec);
  if (ec) {
    // The real CLI dies on a line it cannot parse.
    std::cerr << "Error parsing streaming input line: " << line << ": SyntaxError: JSON Parse error: " << ec.message()
              << std::endl;
    exit_code_ = 1;
    return;
  }
  if (!v.is_object()) return;
  const json::object& o = v.get_object();
  std::string type = string_at(o, "type");
  if (type == "user") {
    ++queued_turns_;  // mid-turn it becomes the next turn (the CLI may fold it in; see README)
  } else if (type == "control_request") {
    const json::value* request = o.if_contains("request");
    if (request && request->is_object()) on_control_request(string_at(o, "request_id"), request->get_object());
  } else if (type == "control_response") {
    const json::value* response = o.if_contains("response");
    if (response && response->is_object()) on_control_response(response->get_object());
  }
  // control_cancel_request, assistant (history insertion), keep_alive, unknown types: nothing
  // on stdout, as with the real CLI.
}

void Session::on_signals(int signal_fd) {
  unsigned char signals[64];
  ssize_t n = ::read(signal_fd, signals, sizeof signals);
  for (ssize_t i = 0; i < n && !exit_code_; ++i) {
    if (signals[i] == SIGCHLD) {
      int status = 0;
      while (::waitpid(-1, &status, WNOHANG) > 0) {
      }
    } else if (signals[i] == SIGINT) {
      // Bidirectional mode: the turn ends with its error result, then the process exits 0.
      if (turn_) interrupt_turn(nullptr);
      exit_code_ = 0;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Host -> CLI control
// ---------------------------------------------------------------------------------------------

void Session::on_control_request(const std::string& id, const json::object& request) {
  std::string subtype = string_at(request, "subtype");
  if (subtype == "initialize") {
    on_initialize(id, request);
  } else if (subtype == "interrupt") {
    if (turn_)
      interrupt_turn(&id);
    else
      write(records_.control_success(id, std::nullopt));
  } else if (subtype == "end_session") {
    if (turn_)
      interrupt_turn(&id);
    else
      write(records_.control_success(id, std::nullopt));
    exit_code_ = 1;
  } else if (subtype == "set_permission_mode") {
    on_set_permission_mode(id, request);
  } else if (subtype == "set_model") {
    std::string model = string_at(request, "model");
    records_.set_model(model.empty() ? script_.model : model);
    write(records_.control_success(id, json::object{}));
  } else if (subtype == "set_max_thinking_tokens" || subtype == "rename_session" || subtype == "apply_flag_settings") {
    write(records_.control_success(id, json::object{}));
  } else if (subtype == "get_binary_version") {
    write(records_.control_success(
        id, json::object{{"version", kClaudeCodeVersion}, {"buildTime", "2026-06-29T19:08:42Z"}}));
  } else if (subtype == "mcp_status") {
    write(records_.control_success(id, json::object{{"mcpServers", json::array{}}}));
  } else if (std::find(std::begin(kRealButNotEmulated), std::end(kRealButNotEmulated), subtype) !=
             std::end(kRealButNotEmulated)) {
    write(records_.control_error(id, "mh-standin-claude does not emulate control request subtype: " + subtype));
  } else {
    write(records_.control_error(id, "Unsupported control request subtype: " + subtype));
  }
}

void Session::on_initialize(const std::string& id, const json::object& request) {
  if (initialized_) {
    write(records_.control_error(id, "Already initialized"));
    return;
  }
  initialized_ = true;
  const json::value* hooks = request.if_contains("hooks");
  const json::value* pre = hooks && hooks->is_object() ? hooks->get_object().if_contains("PreToolUse") : nullptr;
  if (pre && pre->is_array()) {
    for (const auto& m : pre->get_array()) {
      if (!m.is_object()) continue;
      const json::object& mo = m.get_object();
      HookMatcher matcher;
      std::string pattern = string_at(mo, "matcher");
      matcher.matches_all = pattern.empty() || pattern == "*";  // "*", "" and no matcher all fire for every tool
      if (!matcher.matches_all) matcher.tool_names = split_alternatives(pattern);
      if (const json::value* ids = mo.if_contains("hookCallbackIds"); ids && ids->is_array())
        for (const auto& cb : ids->get_array())
          if (cb.is_string()) matcher.callback_ids.emplace_back(cb.get_string());
      if (const json::value* t = mo.if_contains("timeout"); t && t->is_number() && t->to_number<double>() > 0)
        matcher.timeout = std::chrono::milliseconds(static_cast<long long>(t->to_number<double>() * 1000));  // seconds
      pre_tool_use_.push_back(std::move(matcher));
    }
  }
  bool api_key_auth = std::getenv("ANTHROPIC_API_KEY") && !std::getenv("ANTHROPIC_AUTH_TOKEN");
  write(records_.initialize_response(id, api_key_auth));
}

void Session::on_set_permission_mode(const std::string& id, const json::object& request) {
  std::string mode = string_at(request, "mode");
  if (mode == "bypassPermissions" && !launch_.skip_permissions) {
    write(records_.control_error(id, std::string(kBypassRefused)));
    return;
  }
  permission_mode_ = mode;  // unknown modes are accepted without validation, like the CLI
  write(records_.control_success(id, json::object{{"mode", mode}}));
  if (std::find(std::begin(kKnownModes), std::end(kKnownModes), mode) != std::end(kKnownModes))
    write(records_.status(mode));
}

void Session::on_control_response(const json::object& response) {
  // Only an answer to the outstanding hook_callback means anything; a late one (after the
  // timeout's cancel) or an unknown id is dropped silently, as the CLI does.
  if (!turn_ || turn_->activity != Activity::hook_pending) return;
  if (string_at(response, "request_id") != turn_->call.request_id) return;
  on_hook_answer(response);
}

// ---------------------------------------------------------------------------------------------
// Turns
// ---------------------------------------------------------------------------------------------

void Session::pump() {
  while (!exit_code_) {
    if (turn_) {
      advance();
      if (turn_) return;  // waiting for something
      continue;
    }
    if (queued_turns_ > 0) {
      --queued_turns_;
      start_turn();
      continue;
    }
    if (stdin_eof_) exit_code_ = last_result_error_ ? 1 : 0;  // 0 after a final success, 1 after an error
    return;
  }
}

void Session::start_turn() {
  Turn t;
  t.number = ++turns_started_;
  if (t.number <= script_.turns.size()) {
    t.steps = script_.turns[t.number - 1];
  } else {
    Step s;
    s.kind = Step::Kind::text;
    s.text = "mh-standin-claude: the script has no turn " + std::to_string(t.number) + "; nothing more to do.";
    t.steps.push_back(std::move(s));
  }
  t.started = Clock::now();
  t.prompt_id = records_.uuid();
  turn_ = std::move(t);
  write(records_.init(permission_mode_));
}

void Session::open_message(bool continues) {
  if (continues && turn_->message_open) return;
  ++message_counter_;
  char id[40];
  std::snprintf(id, sizeof id, "msg_standin_%03llu", static_cast<unsigned long long>(message_counter_));
  turn_->message_id = id;
  turn_->request_id = "req_standin_" + std::to_string(message_counter_);
  turn_->message_open = true;
  ++turn_->api_messages;
}

void Session::advance() {
  while (turn_ && turn_->activity == Activity::running && !exit_code_) {
    Turn& t = *turn_;
    if (t.next_step >= t.steps.size()) {
      end_turn_completed();
      return;
    }
    const Step step = t.steps[t.next_step++];
    switch (step.kind) {
      case Step::Kind::text:
        open_message(step.continues_message);
        write(records_.assistant(t.message_id, t.request_id, json::object{{"type", "text"}, {"text", step.text}}));
        t.last_text = step.text;
        break;
      case Step::Kind::thinking:
        open_message(step.continues_message);
        write(records_.assistant(
            t.message_id, t.request_id,
            json::object{{"type", "thinking"}, {"thinking", step.text}, {"signature", "mh-standin-claude"}}));
        break;
      case Step::Kind::tool_use:
        // Every tool_use record of the message first, then the calls one at a time (serial,
        // like the CLI's non-read-only calls).
        open_message(step.continues_message);
        t.asked_ns.clear();
        for (const auto& c : step.calls) {
          std::string line = json::serialize(records_.assistant(
              t.message_id, t.request_id,
              json::object{{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", c.input}}));
          line.push_back('\n');
          if (timing_fd_ >= 0) t.asked_ns.push_back(monotonic_ns());
          write_raw(line);
        }
        t.batch = step.calls;
        t.call_index = 0;
        begin_call();
        break;
      case Step::Kind::wait:
        t.activity = Activity::streaming;
        t.deadline = Clock::now() + std::chrono::milliseconds(step.ms);
        break;
      case Step::Kind::idle:
        if (!stdin_eof_) {
          t.activity = Activity::streaming;
          t.idle_until_eof = true;
        }
        break;
      case Step::Kind::chatter:
        open_message(false);
        t.activity = Activity::chattering;
        t.chatter_left = step.count;
        t.chatter_bytes = step.bytes;
        break;
      case Step::Kind::crash:
        crash(step);
      case Step::Kind::api_error:
        end_turn_api_error(step.api_error);
        return;
      case Step::Kind::spawn_background:
        spawn_background(step.background);
        break;
    }
  }
}

void Session::write_chatter() {
  Turn& t = *turn_;
  // Chatter exists to load the reader, so the stand-in must not be the bottleneck: the record
  // is serialized once with markers, then only the text and uuid change, and a bounded batch
  // (so an interrupt that arrives meanwhile is read promptly) goes out in one write.
  static constexpr std::string_view kTextMark = "\x01text\x01", kUuidMark = "\x01uuid\x01";
  if (t.chatter_template.empty()) {
    json::object r = records_.assistant(t.message_id, t.request_id,
                                        json::object{{"type", "text"}, {"text", std::string(kTextMark)}});
    r["uuid"] = std::string(kUuidMark);
    t.chatter_template = json::serialize(r);
  }
  // Control characters are escaped by the serializer: find the escaped markers.
  static const std::string kTextEscaped = json::serialize(json::value(std::string(kTextMark)));
  static const std::string kUuidEscaped = json::serialize(json::value(std::string(kUuidMark)));
  const std::string& tpl = t.chatter_template;
  std::size_t text_at = tpl.find(kTextEscaped), uuid_at = tpl.find(kUuidEscaped);
  std::string batch;
  for (int i = 0; i < 256 && t.chatter_left > 0; ++i, --t.chatter_left) {
    std::string text = "chatter " + std::to_string(++t.chatter_written) + ": ";
    if (text.size() < t.chatter_bytes) text.append(t.chatter_bytes - text.size(), 'x');
    batch.append(tpl, 0, text_at);
    batch += '"';
    batch += text;  // ASCII with nothing to escape
    batch += '"';
    batch.append(tpl, text_at + kTextEscaped.size(), uuid_at - text_at - kTextEscaped.size());
    batch += '"' + records_.uuid() + '"';
    batch.append(tpl, uuid_at + kUuidEscaped.size());
    batch += '\n';
    t.last_text = std::move(text);
  }
  write_raw(batch);
  if (t.chatter_left == 0) t.activity = Activity::running;
}

void Session::on_deadline() {
  Turn& t = *turn_;
  t.deadline.reset();
  switch (t.activity) {
    case Activity::hook_pending:
      // Fail closed: the call is refused and, as with the CLI, not listed in permission_denials.
      record_timing(/*timed_out=*/true);
      write(records_.control_cancel(t.call.request_id));
      t.activity = Activity::running;
      complete_call(records_.tool_result_error(t.batch[t.call_index].id, std::string(kHookTimedOut),
                                               json::string("Error: undefined")));
      return;
    case Activity::tool_running:
      t.activity = Activity::running;
      continue_tool();
      return;
    case Activity::streaming:
      t.activity = Activity::running;
      return;
    case Activity::running:
    case Activity::chattering:
      return;
  }
}

void Session::end_turn_completed() {
  Turn& t = *turn_;
  TurnUsage usage{20 * std::max<std::uint64_t>(t.api_messages, 1), 15 * std::max<std::uint64_t>(t.api_messages, 1)};
  session_usage_.input_tokens += usage.input_tokens;
  session_usage_.output_tokens += usage.output_tokens;
  Records::ResultFields f;
  f.duration_ms = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t.started).count());
  f.num_turns = std::max<std::uint64_t>(t.api_messages, 1);
  f.result = t.last_text;
  f.stop_reason = "end_turn";
  f.turn_usage = usage;
  f.session_usage = session_usage_;
  f.permission_denials = t.denials;
  write(records_.result(f));
  last_result_error_ = false;
  turn_.reset();
}

void Session::end_turn_api_error(const ApiErrorSpec& e) {
  Turn& t = *turn_;
  ApiErrorWords words = api_error_words(e);
  std::string text = e.text.value_or(words.text);
  if (words.retried)
    for (int attempt = 1; attempt <= e.retries; ++attempt)
      write(records_.api_retry(attempt, e.retries, e.status, words.error));
  write(records_.synthetic_assistant(text, words.error));
  Records::ResultFields f;
  f.is_error = true;
  f.api_error_status = e.status;
  f.duration_ms = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t.started).count());
  f.num_turns = t.api_messages + 1;
  f.result = text;
  f.stop_reason = "stop_sequence";
  f.session_usage = session_usage_;
  f.permission_denials = t.denials;
  write(records_.result(f));
  last_result_error_ = true;
  turn_.reset();
}

void Session::end_turn_aborted(const std::string& terminal_reason, bool during_tool) {
  Turn& t = *turn_;
  TurnUsage usage{20 * t.api_messages, 15 * t.api_messages};
  session_usage_.input_tokens += usage.input_tokens;
  session_usage_.output_tokens += usage.output_tokens;
  Records::ResultFields f;
  f.subtype = "error_during_execution";
  f.is_error = true;
  f.duration_ms = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t.started).count());
  f.num_turns = t.api_messages + 1;
  if (during_tool) f.stop_reason = "tool_use";
  f.turn_usage = usage;
  f.session_usage = session_usage_;
  f.permission_denials = t.denials;
  f.terminal_reason = terminal_reason;
  f.errors = std::string("[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=") +
             (during_tool ? "tool_use" : "null");
  write(records_.result(f));
  last_result_error_ = true;
  turn_.reset();
}

// interrupt, end_session and SIGINT: the pending hook is cancelled before the reply (as the CLI
// does), the running tool is rejected, and the turn ends with error_during_execution.
void Session::interrupt_turn(const std::string* control_id) {
  Turn& t = *turn_;
  bool during_tool = t.activity == Activity::hook_pending || t.activity == Activity::tool_running;
  if (t.activity == Activity::hook_pending) write(records_.control_cancel(t.call.request_id));
  if (control_id) write(records_.control_success(*control_id, std::nullopt));
  flush_deferred_result();
  if (during_tool) {
    for (std::size_t i = t.call_index; i < t.batch.size(); ++i)
      write(records_.tool_result_error(t.batch[i].id, std::string(kRejectedToolUse),
                                       json::string("User rejected tool use")));
    write(records_.user_text(std::string(kInterruptedForTool)));
    end_turn_aborted("aborted_tools", true);
  } else {
    write(records_.user_text(std::string(kInterrupted)));
    end_turn_aborted("aborted_streaming", false);
  }
}

// ---------------------------------------------------------------------------------------------
// Calls
// ---------------------------------------------------------------------------------------------

void Session::begin_call() {
  Turn& t = *turn_;
  const ToolCallSpec& spec = t.batch[t.call_index];
  t.call = Call{};
  t.call.input = spec.input;
  for (const auto& m : pre_tool_use_) {
    bool hit = m.matches_all || std::find(m.tool_names.begin(), m.tool_names.end(), spec.name) != m.tool_names.end();
    if (hit)
      for (const auto& id : m.callback_ids)
        t.call.callbacks.emplace_back(id, m.timeout);
  }
  send_next_hook_or_decide();
}

void Session::send_next_hook_or_decide() {
  Turn& t = *turn_;
  Call& c = t.call;
  if (!c.denied && c.next_callback < c.callbacks.size()) {
    const auto& [callback_id, timeout] = c.callbacks[c.next_callback++];
    c.request_id = records_.uuid();
    const ToolCallSpec& spec = t.batch[t.call_index];
    write(
        records_.hook_callback(c.request_id, callback_id, t.prompt_id, permission_mode_, spec.name, c.input, spec.id));
    flush_deferred_result();  // the previous call's tool_result follows this callback, as observed
    t.activity = Activity::hook_pending;
    t.deadline = Clock::now() + timeout;
    return;
  }
  flush_deferred_result();
  decide();
}

void Session::on_hook_answer(const json::object& response) {
  record_timing(/*timed_out=*/false);
  Turn& t = *turn_;
  Call& c = t.call;
  t.activity = Activity::running;
  t.deadline.reset();
  // An error reply fails open: the call goes on to the normal permission pipeline.
  if (string_at(response, "subtype") == "success") {
    const json::value* payload = response.if_contains("response");
    if (payload && payload->is_object()) {
      const json::object& p = payload->get_object();
      std::string decision, reason;
      if (const json::value* s = p.if_contains("hookSpecificOutput"); s && s->is_object()) {
        const json::object& so = s->get_object();
        decision = string_at(so, "permissionDecision");
        reason = string_at(so, "permissionDecisionReason");
        if (const json::value* u = so.if_contains("updatedInput"); u && u->is_object()) c.input = u->get_object();
      }
      if (decision.empty() && string_at(p, "decision") == "block") {  // the legacy form
        decision = "deny";
        reason = string_at(p, "reason");
      }
      const std::string& tool = t.batch[t.call_index].name;
      if (decision == "deny")
        c.denied = reason.empty() ? "Hook PreToolUse:" + tool + " denied this tool" : reason;
      else if (decision == "ask")
        c.denied = reason.empty() ? "Hook PreToolUse:" + tool + " asked for approval" : reason;
      else if (decision == "allow")
        c.allowed = true;
    }
  }
  send_next_hook_or_decide();
}

bool Session::vendor_permits(const ToolCallSpec& spec, const ToolPlan& plan) const {
  if (permission_mode_ == "bypassPermissions") return true;
  if (spec.read_only.value_or(plan.read_only)) return true;
  if (permission_mode_ == "acceptEdits" && (spec.name == "Write" || spec.name == "Edit" || spec.name == "NotebookEdit"))
    return true;
  return false;
}

std::string Session::vendor_refusal(const ToolCallSpec& spec) const {
  if (permission_mode_ == "dontAsk")
    return "Permission to use " + spec.name + " has been denied because Claude Code is running in don't ask mode.";
  if (spec.name == "Bash") return "This command requires approval";
  return "Claude requested permissions to use " + spec.name + ", but you haven't granted it yet.";
}

void Session::decide() {
  Turn& t = *turn_;
  Call& c = t.call;
  const ToolCallSpec& spec = t.batch[t.call_index];
  if (c.denied) {
    deny_call(*c.denied, true);
    return;
  }
  c.plan = plan_tool(spec.name, c.input, spec.run_effect, spec.duration_ms);
  // A hook's allow grants outright; no opinion leaves it to the CLI's own pipeline.
  if (!c.allowed && !vendor_permits(spec, c.plan)) {
    deny_call(vendor_refusal(spec), true);
    return;
  }
  c.next_action = 0;
  continue_tool();
}

void Session::continue_tool() {
  Turn& t = *turn_;
  Call& c = t.call;
  while (c.next_action < c.plan.actions.size()) {
    const ToolAction& a = c.plan.actions[c.next_action++];
    if (a.kind == ToolAction::Kind::sleep) {
      if (c.output.failed || a.ms == 0) continue;
      t.activity = Activity::tool_running;
      t.deadline = Clock::now() + std::chrono::milliseconds(a.ms);
      return;
    }
    perform(a, c.output);
  }
  const ToolCallSpec& spec = t.batch[t.call_index];
  ToolResult r = finish_tool(c.plan, spec.name, c.input, c.output, spec.output);
  complete_call(r.is_error
                    ? records_.tool_result_error(spec.id, r.content, std::move(r.tool_use_result))
                    : records_.tool_result_ok(spec.id, r.content, r.write_is_error_key, std::move(r.tool_use_result)));
}

void Session::deny_call(const std::string& reason, bool listed_in_denials) {
  Turn& t = *turn_;
  const ToolCallSpec& spec = t.batch[t.call_index];
  if (listed_in_denials)
    t.denials.push_back(json::object{{"tool_name", spec.name}, {"tool_use_id", spec.id}, {"tool_input", t.call.input}});
  complete_call(records_.tool_result_error(spec.id, reason, json::string("Error: " + reason)));
}

void Session::complete_call(json::object tool_result) {
  Turn& t = *turn_;
  t.activity = Activity::running;
  t.deadline.reset();
  if (t.call_index + 1 < t.batch.size()) {
    t.deferred_result = std::move(tool_result);
    ++t.call_index;
    begin_call();
    return;
  }
  write(tool_result);
  t.batch.clear();
  t.call_index = 0;
  t.message_open = false;  // the tool results go back to the model: a new API message follows
}

void Session::flush_deferred_result() {
  if (turn_ && turn_->deferred_result) {
    write(*turn_->deferred_result);
    turn_->deferred_result.reset();
  }
}

// ---------------------------------------------------------------------------------------------
// Effects outside the wire
// ---------------------------------------------------------------------------------------------

void Session::crash(const Step& step) {
  if (step.exit_code) ::_exit(*step.exit_code);
  ::signal(step.signal, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, step.signal);
  ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
  ::kill(::getpid(), step.signal);
  ::_exit(128 + step.signal);  // a signal whose default is to continue: still die abruptly
}

void Session::spawn_background(const BackgroundSpec& spec) {
  std::string seconds = std::to_string(spec.seconds);
  pid_t child = ::fork();
  if (child < 0) {
    std::cerr << "mh-standin-claude: fork: " << std::strerror(errno) << "\n";
    return;
  }
  if (child == 0) {
    // Orphan: the intermediate exits at once, so the sleeper is re-parented away from us and
    // only its environment (METAHARNESS_RUN) still ties it to the run, like `(setsid cmd &)`.
    if (spec.orphan && ::fork() != 0) ::_exit(0);
    if (spec.setsid) ::setsid();
    ::signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, STDIN_FILENO);
      ::dup2(devnull, STDOUT_FILENO);  // our stdout must reach EOF when we exit, not when it does
      ::dup2(devnull, STDERR_FILENO);
      if (devnull > STDERR_FILENO) ::close(devnull);
    }
    ::execlp("sleep", "sleep", seconds.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  if (spec.orphan) {
    int status = 0;
    ::waitpid(child, &status, 0);
  }
}

}  // namespace mh::standin
