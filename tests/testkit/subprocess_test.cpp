// testkit::Subprocess's stdio: pipes by default; for a long-lived server (the daemon a bench
// hosts), stdin from /dev/null and stdout and stderr appended to one log.
#include "testkit/subprocess.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace mh::testkit {
namespace {

using namespace std::chrono_literals;

std::string read_all(int fd) {
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0)
    out.append(buf, static_cast<std::size_t>(n));
  return out;
}

std::string file_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// What the child reads on stdin (a line, or nothing at EOF), on stdout; a word on stderr.
const std::vector<std::string> kEchoArgs = {"-c", "read -r line; echo \"read:$line\"; echo said >&2"};

TEST(Subprocess, PipesStdinStdoutAndStderrByDefault) {
  Subprocess child;
  ASSERT_EQ(child.spawn({.program = "/bin/sh", .args = kEchoArgs}), "");
  ASSERT_GE(child.stdin_fd(), 0);
  ASSERT_GE(child.stdout_fd(), 0);
  ASSERT_GE(child.stderr_fd(), 0);
  ASSERT_TRUE(child.write_line("hello"));
  child.close_stdin();
  EXPECT_EQ(read_all(child.stdout_fd()), "read:hello\n");
  EXPECT_EQ(read_all(child.stderr_fd()), "said\n");
  auto status = child.wait_exit(Subprocess::Clock::now() + 30s);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
}

TEST(Subprocess, AServerReadsDevNullAndAppendsStdoutAndStderrToItsLog) {
  auto dir = std::filesystem::temp_directory_path() / ("mh-testkit-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto log = dir / "server.log";
  std::ofstream(log) << "an earlier start\n";
  Subprocess child;
  ASSERT_EQ(child.spawn({.program = "/bin/sh", .args = kEchoArgs, .stdin_null = true, .output_log = log}), "");
  EXPECT_EQ(child.stdin_fd(), -1) << "no pipe: stdin is /dev/null";
  EXPECT_EQ(child.stdout_fd(), -1);
  EXPECT_EQ(child.stderr_fd(), -1);
  auto status = child.wait_exit(Subprocess::Clock::now() + 30s);
  ASSERT_TRUE(status) << "a read from /dev/null ends at once";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  EXPECT_EQ(file_text(log), "an earlier start\nread:\nsaid\n") << "appended, stdout and stderr in order";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mh::testkit
