// Found by the soak (issue 29; seed 29, `Soak.Short`): a run closed by a halt left its
// supervisor alive after its record was closed. Its supervisor.log says "the daemon detached" at
// the moment the run closed, with no daemon stop then, and never "released by the daemon"; the
// supervisor then waits runs.adopt_within_ms (600 s by default) for a daemon that never adopts a
// closed run. The record's close sends Release on the run's SupervisorLink (SupervisedBody::release); a
// link destroyed before that write went out closes the connection with the Release still queued
// (~SupervisorLink ends the state, which clears what is queued), which the supervisor reads as a
// detach. This test is that sequence against a stand-in supervisor socket: the last message a
// daemon sent before letting its link go must reach the supervisor.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "daemon/supervisor/supervisor_link.hpp"
#include "daemon/supervisor/supervisor_protocol.hpp"

namespace {

namespace asio = boost::asio;
namespace sv = mh::supervisor;
using namespace std::chrono_literals;

// A listening Unix socket in a directory of its own, removed with it.
class FakeSupervisor {
 public:
  FakeSupervisor() {
    char tmpl[] = "/tmp/mh-soak-release-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    path_ = dir_ / "supervisor.sock";
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path_.c_str());
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 4) != 0) std::abort();
  }
  ~FakeSupervisor() {
    ::close(fd_);
    std::filesystem::remove_all(dir_);
  }
  const std::filesystem::path& path() const { return path_; }

  // Accepts one daemon, answers its attach with a hello, and returns every byte the daemon sent
  // after the attach line, up to its end of stream.
  std::string serve_one() {
    int peer = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (peer < 0) return "accept failed";
    std::string in;
    char buf[4096];
    while (in.find('\n') == std::string::npos) {
      ssize_t n = ::read(peer, buf, sizeof buf);
      if (n <= 0) break;
      in.append(buf, static_cast<std::size_t>(n));
    }
    sv::Hello hello;
    hello.version = "test";
    hello.supervisor_pid = ::getpid();
    hello.vendor_pid = ::getpid();
    std::string line = sv::serialize(sv::FromSupervisor(hello));
    if (::write(peer, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return "write failed";
    std::string after = in.substr(in.find('\n') + 1);
    for (;;) {
      ssize_t n = ::read(peer, buf, sizeof buf);
      if (n <= 0) break;
      after.append(buf, static_cast<std::size_t>(n));
    }
    ::close(peer);
    return after;
  }

 private:
  std::filesystem::path dir_, path_;
  int fd_ = -1;
};

TEST(SoakFindings, AReleaseSentJustBeforeTheLinkIsLetGoReachesTheSupervisor) {
  FakeSupervisor supervisor;
  std::string received;
  std::thread serve([&] { received = supervisor.serve_one(); });

  asio::io_context io;
  bool attached = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto link = co_await mh::daemon::SupervisorLink::attach(io.get_executor(), supervisor.path(), 5s);
        if (!link) co_return;
        attached = true;
        // What a halted run's end does: its vendor's stdin is closed (the VendorBody), then
        // the record's close sends Release (SupervisedBody::release: "the record is closed: the
        // supervisor has nothing left to keep"), then the run lets its link go. The first write's
        // completion is still to run when the second is queued behind it.
        (*link)->send(sv::CloseStdin{});
        (*link)->send(sv::Release{});
        link->reset();
      },
      asio::detached);
  io.run();
  serve.join();

  ASSERT_TRUE(attached);
  EXPECT_NE(received.find("\"release\""), std::string::npos)
      << "the supervisor read only: [" << received << "] before the daemon's end of stream";
}

}  // namespace
