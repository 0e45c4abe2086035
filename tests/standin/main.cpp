// mh-standin-claude: a scripted stand-in for the Claude Code CLI 2.1.197 in bidirectional
// stream-json mode, for load tests and daemon tests that need many cheap runs. See README.md.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "tests/standin/session.hpp"
#include "tests/standin/standin_identity.hpp"

namespace {

int signal_pipe[2] = {-1, -1};

void forward_signal(int sig) {
  int saved = errno;
  unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = ::write(signal_pipe[1], &byte, 1);
  errno = saved;
}

std::string joined(int argc, char** argv) {
  std::string s;
  for (int i = 1; i < argc; ++i)
    s += (i > 1 ? " " : "") + std::string(argv[i]);
  return s;
}

// The launch must be the one a supervisor uses for the bidirectional wire; anything else is a
// configuration mistake that would otherwise hang waiting for stream-json on stdin.
bool read_launch(int argc, char** argv, mh::standin::LaunchOptions& launch, std::string& error) {
  bool print = false, verbose = false;
  std::string input_format, output_format;
  auto value = [&](int& i, std::string_view arg, std::string_view flag, std::string& out) {
    if (arg == flag && i + 1 < argc) {
      out = argv[++i];
      return true;
    }
    if (arg.size() > flag.size() + 1 && arg.substr(0, flag.size()) == flag && arg[flag.size()] == '=') {
      out = std::string(arg.substr(flag.size() + 1));
      return true;
    }
    return false;
  };
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::string v;
    if (arg == "-p" || arg == "--print")
      print = true;
    else if (arg == "--verbose")
      verbose = true;
    else if (arg == "--dangerously-skip-permissions")
      launch.skip_permissions = true;
    else if (value(i, arg, "--input-format", v))
      input_format = v;
    else if (value(i, arg, "--output-format", v))
      output_format = v;
    else if (value(i, arg, "--permission-mode", v))
      launch.permission_mode = v;
    else if (value(i, arg, "--model", v))
      launch.model = v;
  }
  if (print && output_format == "stream-json" && !verbose) {
    error = "Error: When using --print, --output-format=stream-json requires --verbose";
    return false;
  }
  if (!print || input_format != "stream-json" || output_format != "stream-json") {
    error =
        "mh-standin-claude: expected a bidirectional stream-json launch "
        "(-p --input-format stream-json --output-format stream-json --verbose); got: " +
        joined(argc, argv);
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--version") == 0 || std::strcmp(argv[i], "-v") == 0) {
      std::cout << mh::standin::kClaudeCodeVersion << " (Claude Code)\n";
      return 0;
    }
  // What the drivers that run the stand-in (the soak) read instead of spelling it: its program,
  // the adapter it runs as and its scripts' format (standin_identity.hpp). Not a flag of the CLI
  // it stands in for.
  if (argc == 2 && std::strcmp(argv[1], "--identity") == 0) {
    boost::json::object identity{{"program", mh::standin::kProgram},
                                 {"adapter", mh::standin::kAdapter},
                                 {"script_format", mh::standin::kScriptFormat}};
    std::cout << boost::json::serialize(identity) << "\n";
    return 0;
  }
  mh::standin::LaunchOptions launch;
  std::string error;
  if (!read_launch(argc, argv, launch, error)) {
    std::cerr << error << "\n";
    return 2;
  }
  const char* script_path = std::getenv("MH_STANDIN_SCRIPT");
  if (!script_path || !*script_path) {
    std::cerr << "mh-standin-claude: set MH_STANDIN_SCRIPT to the script file (see "
                 "tests/standin/README.md)\n";
    return 2;
  }
  auto loaded = mh::standin::load_script_file(script_path);
  if (!loaded.script) {
    std::cerr << "mh-standin-claude: " << loaded.error << "\n";
    return 2;
  }
  mh::standin::Script& script = *loaded.script;

  char cwd[4096];
  mh::standin::Records::Identity identity;
  identity.cwd = ::getcwd(cwd, sizeof cwd) ? cwd : ".";
  identity.model = launch.model.value_or(script.model);
  identity.api_model = launch.model.value_or(script.api_model);
  identity.tools = script.tools;
  identity.api_key_source = std::getenv("ANTHROPIC_API_KEY") ? "ANTHROPIC_API_KEY" : "none";
  if (const char* dir = std::getenv("CLAUDE_CONFIG_DIR"))
    identity.config_dir = dir;
  else
    identity.config_dir = std::string(std::getenv("HOME") ? std::getenv("HOME") : "") + "/.claude";
  mh::standin::Records records(std::move(identity));
  records.set_session_id(script.session_id.value_or(records.uuid()));

  // Signals arrive as bytes on a pipe, so the single poll() loop sees them like any input.
  if (::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    std::cerr << "mh-standin-claude: pipe2: " << std::strerror(errno) << "\n";
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGCHLD, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a vanished reader shows up as EPIPE on write, and we exit

  mh::standin::Session session(std::move(script), launch, std::move(records));
  // Opt-in per-call timing for benchmarks (README.md, "Timing stamps"): asked / answered stamps.
  if (const char* timing = std::getenv("MH_STANDIN_TIMING"); timing && *timing) {
    int fd = ::open(timing, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      std::cerr << "mh-standin-claude: cannot open MH_STANDIN_TIMING file " << timing << ": " << std::strerror(errno)
                << "\n";
      return 2;
    }
    session.record_timing_to(fd);
  }
  return session.run(signal_pipe[0]);
}
