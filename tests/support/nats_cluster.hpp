// A real nats-server cluster for tests: N nodes (3 by default) with JetStream on loopback ports
// the OS hands out, each with its own config, store and log under the test's directory, started
// and stopped by the test (by pid), and killed by the kernel should the test process die first
// (a parent-death signal, which follows the thread that started the node: start nodes from a
// thread that outlives them, as a test's main thread does). ready() waits, bounded, until
// JetStream takes a replicated stream. kill(i) SIGKILLs one node, start(i) brings it back on the
// same ports and store. One node is a lone server (no cluster block). With NatsUsers every node
// asks who connects.
#pragma once

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/cli_process.hpp"

namespace mh::test {

// Who may connect: every node's `authorization { users: [...] }`; empty, anyone may. The
// cluster's own connections (ready, leader, move_leader) log in with the user and password.
struct NatsUsers {
  std::string user, password;
  std::string nkey;  // an NKey user's public key (U…); "" for none
  // A whole `authorization {...}` block (users with their permissions, as config/
  // nats-server-fleet.conf ships it) in place of the one made from the fields above; `user` and
  // `password` are then one of its users, for the cluster's own connections.
  std::string authorization;
  // The cluster's routes ask for this user and password (nodes log in to each other with them).
  std::string route_user, route_password;
  bool empty() const { return user.empty() && nkey.empty() && authorization.empty(); }
};

class NatsCluster {
 public:
  NatsCluster(const std::filesystem::path& dir, int nodes = 3, NatsUsers users = {});
  ~NatsCluster();  // SIGKILLs and reaps every node still running
  NatsCluster(const NatsCluster&) = delete;
  NatsCluster& operator=(const NatsCluster&) = delete;

  // Waits (bounded) until every running node answers and a stream replicated on `replicas`
  // nodes can be made; false (with why() saying what) otherwise.
  bool ready(int replicas = 3, std::chrono::milliseconds timeout = std::chrono::seconds(90));
  const std::string& why() const { return why_; }

  std::string url(int i) const;           // nats://127.0.0.1:PORT
  std::vector<std::string> urls() const;  // every node's
  std::uint16_t route_port(int i) const;  // where node i's cluster routes connect
  std::string urls_toml() const;          // ["nats://...", ...]
  int size() const { return static_cast<int>(nodes_.size()); }
  int pid(int i) const;

  void kill(int i);   // SIGKILL and reap
  void start(int i);  // again, on its ports and store
  std::string log(int i) const;

  // The node (its server_name, "n<i>") that leads JetStream stream `stream`, asked of any running
  // node; "" when none answers.
  std::string leader(const std::string& stream) const;
  // Asks the stream's leader to step down ($JS.API.STREAM.LEADER.STEPDOWN) until the leader is
  // node `node` (`on` true) or any node but it (`on` false): bounded by `timeout`.
  bool move_leader(const std::string& stream, int node, bool on,
                   std::chrono::milliseconds timeout = std::chrono::seconds(60));

  static std::filesystem::path server_binary();  // nats-server on PATH (/usr/sbin with the package)

 private:
  struct Node {
    std::uint16_t client_port = 0, route_port = 0;
    std::filesystem::path config, log;
    std::unique_ptr<CliProcess> process;
  };
  std::vector<Node> nodes_;
  NatsUsers users_;
  std::string why_;
};

// Whether every thread of process `pid` is stopped (/proc/<pid>/task/*/stat says T), within
// `timeout`: kill(SIGSTOP) returns before they are, and a thread of the node that was running
// serves on until it notices (a test once saw a request answered after the kill returned).
bool every_thread_stopped(int pid, std::chrono::milliseconds timeout);

// A NATS node stopped (SIGSTOP) for as long as this lives, every thread of it before the
// constructor returns: its connections stay open, nothing it is sent is answered. SIGCONT at the
// end whatever happened, so the next test finds it running.
class StoppedNode {
 public:
  explicit StoppedNode(int pid) : pid_(pid) {
    if (pid_ <= 0) return;  // never kill(-1, …): that would be every process
    ::kill(pid_, SIGSTOP);
    stopped_ = every_thread_stopped(pid_, std::chrono::seconds(10));
  }
  ~StoppedNode() { resume(); }
  // Whether the node was seen stopped (every thread) within 10 s of the signal.
  bool stopped() const { return stopped_; }
  StoppedNode(const StoppedNode&) = delete;
  StoppedNode& operator=(const StoppedNode&) = delete;
  void resume() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
    pid_ = -1;
  }

 private:
  int pid_;
  bool stopped_ = false;
};

}  // namespace mh::test
