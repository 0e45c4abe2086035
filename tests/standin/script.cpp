#include "tests/standin/script.hpp"

#include <csignal>
#include <fstream>
#include <initializer_list>
#include <sstream>

namespace mh::standin {

namespace json = boost::json;

namespace {

// Thrown while reading the script; carries the path of the offending element.
struct ScriptError {
  std::string message;
};

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw ScriptError{where + ": " + what};
}

// A strict reader: unknown keys are errors, so a misspelt field never silently does nothing.
class Fields {
 public:
  Fields(const json::value& v, std::string where) : where_(std::move(where)) {
    if (!v.is_object()) fail(where_, "expected an object");
    o_ = &v.get_object();
  }

  void allow_only(std::initializer_list<std::string_view> keys) const {
    for (const auto& kv : *o_) {
      bool known = false;
      for (auto k : keys)
        known = known || kv.key() == k;
      if (!known) fail(where_, "unknown key \"" + std::string(kv.key()) + "\"");
    }
  }

  const json::value* find(std::string_view key) const { return o_->if_contains(key); }

  std::optional<std::string> string(std::string_view key) const {
    const json::value* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) fail(where_ + "." + std::string(key), "expected a string");
    return std::string(v->get_string());
  }

  std::string required_string(std::string_view key) const {
    auto s = string(key);
    if (!s) fail(where_, "missing \"" + std::string(key) + "\"");
    return *s;
  }

  std::optional<std::uint64_t> count(std::string_view key) const {
    const json::value* v = find(key);
    if (!v) return std::nullopt;
    if (v->is_uint64()) return v->get_uint64();
    if (v->is_int64() && v->get_int64() >= 0) return static_cast<std::uint64_t>(v->get_int64());
    fail(where_ + "." + std::string(key), "expected a non-negative integer");
  }

  std::optional<bool> boolean(std::string_view key) const {
    const json::value* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_bool()) fail(where_ + "." + std::string(key), "expected true or false");
    return v->get_bool();
  }

  const std::string& where() const { return where_; }

 private:
  const json::object* o_ = nullptr;
  std::string where_;
};

int signal_number(const json::value& v, const std::string& where) {
  if (v.is_int64() && v.get_int64() > 0 && v.get_int64() < 65) return static_cast<int>(v.get_int64());
  if (!v.is_string()) fail(where, "expected a signal name (\"SIGKILL\") or number");
  std::string name(v.get_string());
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  static const std::pair<std::string_view, int> kSignals[] = {
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ILL", SIGILL},   {"ABRT", SIGABRT},
      {"FPE", SIGFPE},   {"KILL", SIGKILL}, {"SEGV", SIGSEGV}, {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},
      {"TERM", SIGTERM}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"BUS", SIGBUS}};
  for (const auto& [n, s] : kSignals)
    if (name == n) return s;
  fail(where, "unknown signal \"" + std::string(v.get_string()) + "\"");
}

// "sleep 60" for 60000 ms, "sleep 0.25" for 250 ms: what a model would have written.
std::string sleep_command(std::uint64_t ms) {
  std::string s = std::to_string(ms / 1000);
  if (ms % 1000 != 0) {
    char frac[8];
    std::snprintf(frac, sizeof frac, ".%03u", static_cast<unsigned>(ms % 1000));
    std::string f(frac);
    while (f.back() == '0')
      f.pop_back();
    s += f;
  }
  return "sleep " + s;
}

class Loader {
 public:
  Script load(const json::value& root) {
    Fields top(root, "script");
    top.allow_only({"format", "description", "session_id", "model", "api_model", "tools", "turns"});
    auto format = top.required_string("format");
    if (format != kScriptFormat)
      fail("script.format", "expected \"" + std::string(kScriptFormat) + "\", got \"" + format + "\"");
    Script s;
    s.session_id = top.string("session_id");
    if (auto m = top.string("model")) s.model = *m;
    if (auto m = top.string("api_model")) s.api_model = *m;
    s.tools = default_tools();
    if (const json::value* tools = top.find("tools")) {
      if (!tools->is_array()) fail("script.tools", "expected an array of tool names");
      s.tools.clear();
      for (const auto& t : tools->get_array()) {
        if (!t.is_string()) fail("script.tools", "expected an array of tool names");
        s.tools.emplace_back(t.get_string());
      }
    }
    const json::value* turns = top.find("turns");
    if (!turns || !turns->is_array()) fail("script", "missing \"turns\": an array of turns, each an array of steps");
    for (std::size_t t = 0; t < turns->get_array().size(); ++t) {
      const json::value& turn = turns->get_array()[t];
      std::string where = "turns[" + std::to_string(t) + "]";
      if (!turn.is_array()) fail(where, "expected an array of steps");
      std::vector<Step> steps;
      for (std::size_t i = 0; i < turn.get_array().size(); ++i)
        steps.push_back(step(turn.get_array()[i], where + "[" + std::to_string(i) + "]"));
      s.turns.push_back(std::move(steps));
    }
    return s;
  }

 private:
  ToolCallSpec call(const Fields& f) {
    ToolCallSpec c;
    c.id = f.string("id").value_or("toolu_standin_" + std::to_string(++generated_ids_));
    c.name = f.required_string("name");
    if (const json::value* input = f.find("input")) {
      if (!input->is_object()) fail(f.where() + ".input", "expected an object (the tool's input)");
      c.input = input->get_object();
    }
    if (auto effect = f.string("effect")) {
      if (*effect != "auto" && *effect != "none") fail(f.where() + ".effect", "expected \"auto\" or \"none\"");
      c.run_effect = *effect == "auto";
    }
    c.output = f.string("output");
    c.duration_ms = f.count("duration_ms").value_or(0);
    c.read_only = f.boolean("read_only");
    return c;
  }

  Step step(const json::value& v, const std::string& where) {
    Fields f(v, where);
    std::string type = f.required_string("type");
    Step s;
    s.continues_message = f.boolean("continues").value_or(false);
    if (type == "text" || type == "thinking") {
      f.allow_only({"type", "text", "thinking", "continues"});
      s.kind = type == "text" ? Step::Kind::text : Step::Kind::thinking;
      s.text = f.required_string(type);
    } else if (type == "tool_use") {
      s.kind = Step::Kind::tool_use;
      if (const json::value* calls = f.find("calls")) {
        f.allow_only({"type", "calls", "continues"});
        if (!calls->is_array() || calls->get_array().empty()) fail(where + ".calls", "expected a non-empty array");
        for (std::size_t i = 0; i < calls->get_array().size(); ++i) {
          Fields c(calls->get_array()[i], where + ".calls[" + std::to_string(i) + "]");
          c.allow_only({"id", "name", "input", "effect", "output", "duration_ms", "read_only"});
          s.calls.push_back(call(c));
        }
      } else {
        f.allow_only({"type", "id", "name", "input", "effect", "output", "duration_ms", "read_only", "continues"});
        s.calls.push_back(call(f));
      }
    } else if (type == "sleep") {
      // A running Bash tool (governed like any call), interruptible while it runs.
      f.allow_only({"type", "ms", "id", "touch", "continues"});
      auto ms = f.count("ms");
      if (!ms) fail(where, "missing \"ms\"");
      s.kind = Step::Kind::tool_use;
      ToolCallSpec c;
      c.id = f.string("id").value_or("toolu_standin_" + std::to_string(++generated_ids_));
      c.name = "Bash";
      std::string command = sleep_command(*ms);
      if (auto touch = f.string("touch")) command = "touch " + *touch + " && " + command;
      c.input = json::object{{"command", command}, {"description", "Wait"}};
      s.calls.push_back(std::move(c));
    } else if (type == "wait") {
      f.allow_only({"type", "ms", "continues"});
      auto ms = f.count("ms");
      if (!ms) fail(where, "missing \"ms\"");
      s.kind = Step::Kind::wait;
      s.ms = *ms;
    } else if (type == "idle") {
      f.allow_only({"type"});
      s.kind = Step::Kind::idle;
    } else if (type == "chatter") {
      f.allow_only({"type", "count", "bytes"});
      s.kind = Step::Kind::chatter;
      s.count = f.count("count").value_or(100);
      s.bytes = f.count("bytes").value_or(200);
    } else if (type == "crash") {
      f.allow_only({"type", "signal", "exit_code"});
      s.kind = Step::Kind::crash;
      const json::value* sig = f.find("signal");
      auto code = f.count("exit_code");
      if (!sig == !code) fail(where, "give exactly one of \"signal\" and \"exit_code\"");
      if (sig) s.signal = signal_number(*sig, where + ".signal");
      if (code) s.exit_code = static_cast<int>(*code);
    } else if (type == "api_error") {
      f.allow_only({"type", "status", "message", "text", "retries"});
      s.kind = Step::Kind::api_error;
      s.api_error.status = static_cast<int>(f.count("status").value_or(401));
      s.api_error.message = f.string("message").value_or(
          s.api_error.status == 401
              ? "OAuth token has expired. Please obtain a new token or refresh your existing token."
              : "mh-standin-claude scripted API error");
      s.api_error.text = f.string("text");
      s.api_error.retries = static_cast<int>(f.count("retries").value_or(0));
    } else if (type == "spawn_background") {
      f.allow_only({"type", "seconds", "setsid", "orphan"});
      s.kind = Step::Kind::spawn_background;
      s.background.seconds = f.count("seconds").value_or(300);
      s.background.setsid = f.boolean("setsid").value_or(true);
      s.background.orphan = f.boolean("orphan").value_or(true);
    } else {
      fail(where + ".type", "unknown step type \"" + type +
                                "\" (text, thinking, tool_use, sleep, wait, idle, chatter, crash, api_error, "
                                "spawn_background)");
    }
    return s;
  }

  std::uint64_t generated_ids_ = 0;
};

}  // namespace

std::vector<std::string> default_tools() {
  return {"Task",          "Bash",         "CronCreate",   "CronDelete", "CronList",       "Edit",
          "EnterWorktree", "ExitWorktree", "NotebookEdit", "Read",       "ReportFindings", "ScheduleWakeup",
          "SendMessage",   "Skill",        "TaskCreate",   "TaskGet",    "TaskList",       "TaskOutput",
          "TaskStop",      "TaskUpdate",   "WebFetch",     "WebSearch",  "Workflow",       "Write"};
}

LoadResult parse_script(std::string_view text) {
  boost::system::error_code ec;
  json::value root = json::parse(text, ec);
  if (ec) return {std::nullopt, "the script is not JSON: " + ec.message()};
  try {
    return {Loader().load(root), {}};
  } catch (const ScriptError& e) {
    return {std::nullopt, e.message};
  }
}

LoadResult load_script_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {std::nullopt, "cannot read the script " + path};
  std::ostringstream ss;
  ss << in.rdbuf();
  auto result = parse_script(ss.str());
  if (!result.script) result.error = path + ": " + result.error;
  return result;
}

}  // namespace mh::standin
