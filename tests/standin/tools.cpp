#include "tests/standin/tools.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace mh::standin {

namespace {

std::string string_field(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

// Words and separators of a command line: quotes group, `;` `&&` `||` and newlines separate,
// `>` and `>>` redirect. Anything fancier (pipes, `&`, substitutions) is not interpreted.
struct Token {
  enum class Kind { word, separator, redirect, append, unsupported } kind;
  std::string text;
};

std::vector<Token> tokenize(const std::string& command) {
  std::vector<Token> tokens;
  std::string word;
  bool in_word = false;
  auto flush = [&] {
    if (in_word) tokens.push_back({Token::Kind::word, word});
    word.clear();
    in_word = false;
  };
  for (std::size_t i = 0; i < command.size(); ++i) {
    char c = command[i];
    if (c == '\'' || c == '"') {
      in_word = true;
      std::size_t close = command.find(c, i + 1);
      if (close == std::string::npos) close = command.size();
      word += command.substr(i + 1, close - i - 1);
      i = close;
    } else if (c == ' ' || c == '\t') {
      flush();
    } else if (c == ';' || c == '\n') {
      flush();
      tokens.push_back({Token::Kind::separator, std::string(1, c)});
    } else if ((c == '&' || c == '|') && i + 1 < command.size() && command[i + 1] == c) {
      flush();
      tokens.push_back({Token::Kind::separator, std::string(2, c)});
      ++i;
    } else if (c == '>' && in_word && word == "2") {
      // 2>/dev/null or 2>&1: stderr plumbing, which the stand-in has none of.
      word.clear();
      in_word = false;
      std::size_t end = command.find_first_of(" \t;\n", i);
      i = (end == std::string::npos ? command.size() : end) - 1;
    } else if (c == '>') {
      flush();
      bool append = i + 1 < command.size() && command[i + 1] == '>';
      tokens.push_back({append ? Token::Kind::append : Token::Kind::redirect, append ? ">>" : ">"});
      if (append) ++i;
    } else if (c == '&' || c == '|' || c == '`' || c == '$' || c == '(' || c == ')' || c == '<') {
      flush();
      tokens.push_back({Token::Kind::unsupported, std::string(1, c)});
    } else {
      in_word = true;
      word += c;
    }
  }
  flush();
  return tokens;
}

bool is_read_only_command(const std::string& name) {
  static const char* kReadOnly[] = {"echo", "sleep", "true", ":", "pwd", "cat", "ls"};
  return std::any_of(std::begin(kReadOnly), std::end(kReadOnly), [&](const char* r) { return name == r; });
}

// `> path` or `>> path` after a simple command.
struct Redirect {
  bool present = false;
  bool append = false;
  std::string path;
};

// One simple command (words plus an optional redirect) -> actions.
void plan_simple(const std::vector<std::string>& words, const Redirect& redirect, ToolPlan& plan, bool& read_only) {
  if (words.empty()) return;
  const std::string& cmd = words[0];
  std::vector<std::string> args;
  for (std::size_t i = 1; i < words.size(); ++i)
    if (!(cmd != "echo" && words[i].size() > 1 && words[i][0] == '-')) args.push_back(words[i]);
  if (!is_read_only_command(cmd) || redirect.present) read_only = false;
  ToolAction a;
  if (cmd == "touch") {
    a.kind = ToolAction::Kind::touch;
    a.paths = args;
  } else if (cmd == "mkdir") {
    a.kind = ToolAction::Kind::mkdir;
    a.paths = args;
  } else if (cmd == "echo") {
    bool newline = true;
    if (!args.empty() && args[0] == "-n") {
      newline = false;
      args.erase(args.begin());
    }
    for (std::size_t i = 0; i < args.size(); ++i)
      a.text += (i ? " " : "") + args[i];
    if (newline) a.text += "\n";
    if (redirect.present) {
      a.kind = redirect.append ? ToolAction::Kind::append_file : ToolAction::Kind::write_file;
      a.paths = {redirect.path};
    } else {
      a.kind = ToolAction::Kind::print;
    }
  } else if (cmd == "sleep") {
    double seconds = args.empty() ? 0 : std::strtod(args[0].c_str(), nullptr);
    a.kind = ToolAction::Kind::sleep;
    a.ms = static_cast<std::uint64_t>(std::llround(std::max(0.0, seconds) * 1000));
  } else if (cmd == "true" || cmd == ":") {
    return;
  } else if (cmd == "pwd") {
    a.kind = ToolAction::Kind::print_cwd;
  } else if (cmd == "cat") {
    a.kind = ToolAction::Kind::print_file;
    a.paths = args;
  } else if (cmd == "ls") {
    a.kind = ToolAction::Kind::list_cwd;
  } else {
    a.kind = ToolAction::Kind::unsupported;
    a.text = cmd;
  }
  plan.actions.push_back(std::move(a));
}

void plan_bash(const std::string& command, ToolPlan& plan) {
  bool read_only = true;
  std::vector<std::string> words;
  Redirect redirect;
  std::optional<bool> pending_redirect;  // the next word is a redirect target (true: append)
  auto flush = [&] {
    plan_simple(words, redirect, plan, read_only);
    words.clear();
    redirect = Redirect{};
  };
  for (const auto& t : tokenize(command)) {
    switch (t.kind) {
      case Token::Kind::word:
        if (pending_redirect) {
          redirect = Redirect{true, *pending_redirect, t.text};
          pending_redirect.reset();
        } else {
          words.push_back(t.text);
        }
        break;
      case Token::Kind::separator:
        flush();
        break;
      case Token::Kind::redirect:
        pending_redirect = false;
        break;
      case Token::Kind::append:
        pending_redirect = true;
        break;
      case Token::Kind::unsupported:
        plan.actions.push_back({ToolAction::Kind::unsupported, {}, "`" + t.text + "` in " + command, 0});
        read_only = false;
        break;
    }
  }
  flush();
  plan.read_only = read_only;
}

bool write_file(const std::string& path, const std::string& text, bool append, std::string& error) {
  std::ofstream out(path, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
  if (!out) {
    error = "cannot write " + path;
    return false;
  }
  out << text;
  return true;
}

std::string read_whole(const std::string& path, bool& ok) {
  std::ifstream in(path, std::ios::binary);
  ok = static_cast<bool>(in);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

ToolPlan plan_tool(const std::string& name, const json::object& input, bool run_effect, std::uint64_t extra_ms) {
  ToolPlan plan;
  if (name == "Bash") {
    plan.shape = ToolPlan::Shape::bash;
    plan_bash(string_field(input, "command"), plan);  // classifies it even when nothing runs
    if (!run_effect) plan.actions.clear();
  } else if (name == "Write") {
    plan.shape = ToolPlan::Shape::write;
    if (run_effect)
      plan.actions.push_back(
          {ToolAction::Kind::write_file, {string_field(input, "file_path")}, string_field(input, "content"), 0});
  } else if (name == "Read") {
    plan.shape = ToolPlan::Shape::read;
    plan.read_only = true;
  } else {
    // Read-only in the vendor's eyes: the tools its default mode runs without asking.
    static const char* kReadOnlyTools[] = {"Glob", "Grep", "LS", "TaskGet", "TaskList", "TaskOutput", "WebSearch"};
    plan.read_only =
        std::any_of(std::begin(kReadOnlyTools), std::end(kReadOnlyTools), [&](const char* t) { return name == t; });
  }
  if (extra_ms > 0) plan.actions.push_back({ToolAction::Kind::sleep, {}, {}, extra_ms});
  return plan;
}

void perform(const ToolAction& a, ToolOutput& out) {
  if (out.failed) return;  // like `&&`: nothing after a failure runs
  switch (a.kind) {
    case ToolAction::Kind::touch:
      for (const auto& p : a.paths) {
        int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
          out.failed = true;
          out.error_text = "touch: cannot touch '" + p + "': No such file or directory";
          return;
        }
        ::futimens(fd, nullptr);
        ::close(fd);
      }
      return;
    case ToolAction::Kind::mkdir:
      for (const auto& p : a.paths) {
        std::error_code ec;
        std::filesystem::create_directories(p, ec);
      }
      return;
    case ToolAction::Kind::write_file:
    case ToolAction::Kind::append_file:
      if (a.paths.empty() || a.paths[0].empty() ||
          !write_file(a.paths[0], a.text, a.kind == ToolAction::Kind::append_file, out.error_text))
        out.failed = true;
      return;
    case ToolAction::Kind::print:
      out.stdout_text += a.text;
      return;
    case ToolAction::Kind::print_cwd:
      out.stdout_text += std::filesystem::current_path().string() + "\n";
      return;
    case ToolAction::Kind::print_file:
      for (const auto& p : a.paths) {
        bool ok = false;
        std::string text = read_whole(p, ok);
        if (!ok) {
          out.failed = true;
          out.error_text = "cat: " + p + ": No such file or directory";
          return;
        }
        out.stdout_text += text;
      }
      return;
    case ToolAction::Kind::list_cwd: {
      std::vector<std::string> names;
      std::error_code ec;
      for (const auto& e : std::filesystem::directory_iterator(".", ec)) {
        std::string n = e.path().filename().string();
        if (!n.empty() && n[0] != '.') names.push_back(n);
      }
      std::sort(names.begin(), names.end());
      for (const auto& n : names)
        out.stdout_text += n + "\n";
      return;
    }
    case ToolAction::Kind::sleep:
      return;  // the session waits; nothing to do here
    case ToolAction::Kind::unsupported:
      out.failed = true;
      out.error_text = "/bin/bash: line 1: " + a.text + ": command not found (mh-standin-claude runs no shell)";
      return;
  }
}

ToolResult finish_tool(const ToolPlan& plan, const std::string& name, const json::object& input, const ToolOutput& out,
                       const std::optional<std::string>& scripted_output) {
  ToolResult r;
  switch (plan.shape) {
    case ToolPlan::Shape::bash: {
      if (out.failed) {
        r.is_error = true;
        r.content = "Exit code 127\n" + out.error_text;
        r.tool_use_result = json::string("Error: " + r.content);
        return r;
      }
      std::string text = scripted_output.value_or(out.stdout_text);
      while (!text.empty() && text.back() == '\n')
        text.pop_back();
      r.content = text.empty() ? "(Bash completed with no output)" : text;
      r.tool_use_result = json::object{
          {"stdout", text}, {"stderr", ""}, {"interrupted", false}, {"isImage", false}, {"noOutputExpected", false}};
      return r;
    }
    case ToolPlan::Shape::write: {
      std::string path = string_field(input, "file_path");
      if (out.failed) {
        r.is_error = true;
        r.content = out.error_text;
        r.tool_use_result = json::string("Error: " + out.error_text);
        return r;
      }
      r.write_is_error_key = false;
      r.content = scripted_output.value_or("File created successfully at: " + path +
                                           " (file state is current in your context \u2014 no need to Read it back)");
      r.tool_use_result = json::object{{"type", "create"},
                                       {"filePath", path},
                                       {"content", string_field(input, "content")},
                                       {"structuredPatch", json::array{}},
                                       {"originalFile", nullptr},
                                       {"userModified", false}};
      return r;
    }
    case ToolPlan::Shape::read: {
      std::string path = string_field(input, "file_path");
      bool ok = false;
      std::string text = read_whole(path, ok);
      if (!ok && !scripted_output) {
        r.is_error = true;
        r.content = "<tool_use_error>File does not exist.</tool_use_error>";
        r.tool_use_result = json::string("Error: File does not exist.");
        return r;
      }
      r.write_is_error_key = false;
      std::string numbered;
      std::size_t line = 0, start = 0;
      for (;;) {
        std::size_t nl = text.find('\n', start);
        numbered += std::to_string(++line) + "\t" + text.substr(start, nl == std::string::npos ? nl : nl - start);
        if (nl == std::string::npos) break;
        numbered += "\n";
        start = nl + 1;
      }
      r.content = scripted_output.value_or(numbered);
      r.tool_use_result = json::object{
          {"type", "text"},
          {"file",
           json::object{
               {"filePath", path}, {"content", text}, {"numLines", line}, {"startLine", 1}, {"totalLines", line}}}};
      return r;
    }
    case ToolPlan::Shape::other:
      r.write_is_error_key = false;
      r.content = scripted_output.value_or(name + " completed (mh-standin-claude)");
      r.tool_use_result = json::object{{"result", r.content}};
      return r;
  }
  return r;
}

}  // namespace mh::standin
