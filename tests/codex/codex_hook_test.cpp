// mh-codex-hook on its own. Codex fails OPEN when a hook crashes, times out or prints garbage, so
// the one property that matters is that every failure to reach the run prints an explicit deny
// and exits 0; and that a reachable run's answer passes through untouched.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <thread>

#include "protocol/json.hpp"
#include "tests/support/cli_process.hpp"

namespace mh::test {
namespace {

std::filesystem::path hook_binary() {
  return metaharness_binary().parent_path() / "mh-codex-hook";
}

const std::string kInput =
    R"({"session_id":"s","hook_event_name":"PreToolUse","tool_name":"view_image","tool_use_id":"call_1","tool_input":{"path":"p.png"}})";

// A hook channel stand-in: one abstract socket, one connection, whatever the test makes it do.
class Channel {
 public:
  explicit Channel(std::string name) : name_("@" + std::move(name)) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path + 1, name_.data() + 1, name_.size() - 1);
    auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name_.size());
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&sa), len), 0) << std::strerror(errno);
    EXPECT_EQ(::listen(fd_, 4), 0);
  }
  ~Channel() {
    if (server_.joinable()) server_.join();
    ::close(fd_);
  }
  const std::string& address() const { return name_; }

  // Accepts one hook, reads its request line, then answers `reply` (nullopt: close silently;
  // "hang": keep the connection open until the hook gives up).
  void serve(std::optional<std::string> reply) {
    server_ = std::thread([this, reply] {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      char buf[4096];
      for (;;) {
        ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        request_.append(buf, static_cast<std::size_t>(n));
        if (request_.find('\n') != std::string::npos) break;
      }
      if (reply && *reply == "hang") {
        while (::read(c, buf, sizeof buf) > 0) {
        }  // until the hook closes its end
      } else if (reply) {
        std::string line = *reply + "\n";
        (void)!::write(c, line.data(), line.size());
      }
      ::close(c);
    });
  }
  std::string request() {
    if (server_.joinable()) server_.join();
    return request_;
  }

 private:
  std::string name_;
  int fd_ = -1;
  std::thread server_;
  std::string request_;
};

struct HookRun {
  int status;
  std::string out;
};

HookRun run_hook(std::vector<std::string> env, const std::string& input = kInput) {
  CliProcess hook({hook_binary().string()}, env);
  hook.send(input);
  hook.close_stdin();
  std::string out = hook.read_out(30s);
  return {hook.finish(30s), out};
}

void expect_deny(const HookRun& r, std::string_view why) {
  EXPECT_EQ(r.status, 0) << "the hook must never fail: Codex would let the call through";
  auto v = protocol::parse_json(r.out);
  ASSERT_TRUE(v && v->is_object()) << r.out;
  const auto& out = v->as_object().at("hookSpecificOutput").as_object();
  EXPECT_EQ(out.at("hookEventName"), "PreToolUse");
  EXPECT_EQ(out.at("permissionDecision"), "deny");
  EXPECT_NE(std::string(out.at("permissionDecisionReason").as_string()).find(why), std::string::npos) << r.out;
}

std::string unique(const std::string& what) {
  return "metaharness-test/" + what + "/" + std::to_string(::getpid());
}

TEST(CodexHook, OutsideAGovernedRunItDenies) {
  expect_deny(run_hook({"PATH=/usr/bin:/bin"}), "METAHARNESS_HOOK_SOCKET is not set");
}

TEST(CodexHook, AnUnreachableRunIsADeny) {
  expect_deny(run_hook({"METAHARNESS_HOOK_SOCKET=@" + unique("nobody-listens")}), "unreachable");
}

TEST(CodexHook, SilenceUntilItsOwnDeadlineIsADenyNotATimeout) {
  Channel channel(unique("hangs"));
  channel.serve("hang");
  auto r = run_hook({"METAHARNESS_HOOK_SOCKET=" + channel.address(), "METAHARNESS_HOOK_DEADLINE_S=1"});
  expect_deny(r, "no answer within 1 s");
}

TEST(CodexHook, AChannelClosedWithoutAnAnswerIsADeny) {
  Channel channel(unique("closes"));
  channel.serve(std::nullopt);
  expect_deny(run_hook({"METAHARNESS_HOOK_SOCKET=" + channel.address()}), "closed the channel without answering");
}

TEST(CodexHook, ARefusalFromTheRunIsADenySayingWhy) {
  Channel channel(unique("refuses"));
  channel.serve("refused: the peer is not a process of this run");
  expect_deny(run_hook({"METAHARNESS_HOOK_SOCKET=" + channel.address()}), "not a process of this run");
}

TEST(CodexHook, TheRunsAnswerPassesThroughAndNoOpinionPrintsNothing) {
  {
    Channel channel(unique("answers"));
    std::string answer =
        R"({"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}})";
    channel.serve(answer);
    auto r = run_hook({"METAHARNESS_HOOK_SOCKET=" + channel.address()});
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.out, answer + "\n");
    auto request = channel.request();
    ASSERT_FALSE(request.empty());
    EXPECT_EQ(protocol::parse_json(request.substr(0, request.find('\n')))->as_object().at("tool_use_id"), "call_1")
        << "the hook hands Codex's input over as one line";
  }
  {
    Channel channel(unique("no-opinion"));
    channel.serve("");
    auto r = run_hook({"METAHARNESS_HOOK_SOCKET=" + channel.address()});
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.out, "") << "no opinion: Codex's own pipeline (its approval) decides";
  }
}

TEST(CodexHook, AMultiLineInputStillTravelsAsOneLine) {
  Channel channel(unique("multiline"));
  channel.serve("");
  run_hook({"METAHARNESS_HOOK_SOCKET=" + channel.address()}, "{\n  \"tool_name\": \"x\",\n  \"tool_use_id\": \"c\"\n}");
  auto request = channel.request();
  EXPECT_EQ(request.find('\n'), request.size() - 1) << request;
  EXPECT_TRUE(protocol::parse_json(request.substr(0, request.size() - 1)));
}

}  // namespace
}  // namespace mh::test
