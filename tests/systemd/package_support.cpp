#include "tests/systemd/package_support.hpp"

namespace mh::test {

Output run_command(std::vector<std::string> argv, std::chrono::milliseconds timeout) {
  CliProcess p(std::move(argv));
  p.close_stdin();
  Output o;
  o.status = p.finish(timeout);
  for (const auto& line : p.events())
    o.out += (o.out.empty() ? "" : "\n") + line.raw;
  o.err = p.stderr_text();
  return o;
}

std::filesystem::path build_dir() {
  return MH_TEST_BUILD_DIR;
}

std::filesystem::path build_package(const std::filesystem::path& work, std::string& log) {
  // The build's own output goes to a file: it is far more than a pipe holds.
  auto log_file = work / "build-deb.log";
  auto o = run_command(
      {"/bin/sh", "-c", "exec \"$0\" \"$1\" \"$2\" 2>\"$3\"", (source_dir() / "packaging/build-deb.sh").string(),
       source_dir().string(), build_dir().string(), log_file.string()},
      std::chrono::minutes(40));
  if (o.status == 0 && !o.out.empty()) {
    std::filesystem::path deb = o.out.substr(o.out.rfind('\n') == std::string::npos ? 0 : o.out.rfind('\n') + 1);
    if (std::filesystem::exists(deb)) return deb;
  }
  log = "build-deb.sh exited " + std::to_string(o.status) + "; its log (" + log_file.string() + "):\n" +
        (std::filesystem::exists(log_file) ? read_file(log_file) : "(none)");
  if (log.size() > 20000) log = "..." + log.substr(log.size() - 20000);
  return {};
}

}  // namespace mh::test
