#include "tests/support/nats_cluster.hpp"

#include <nats/nats.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>

namespace mh::test {

namespace {

// Ports the kernel hands out: every socket is held until all are picked, so the n ports differ;
// a port taken by someone else between here and the server's bind makes the node fail to start,
// which ready() reports.
std::vector<std::uint16_t> free_ports(int n) {
  std::vector<int> fds;
  std::vector<std::uint16_t> ports;
  for (int i = 0; i < n; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("cannot pick a free port");
    fds.push_back(fd);
    ports.push_back(ntohs(a.sin_port));
  }
  for (int fd : fds)
    ::close(fd);
  return ports;
}

// A connection to `url`, logged in with the user and password when the nodes ask for them.
natsStatus connect_to(natsConnection** nc, const std::string& url, const NatsUsers& users) {
  natsOptions* opts = nullptr;
  natsStatus s = natsOptions_Create(&opts);
  if (s == NATS_OK) s = natsOptions_SetURL(opts, url.c_str());
  if (s == NATS_OK && !users.user.empty())
    s = natsOptions_SetUserInfo(opts, users.user.c_str(), users.password.c_str());
  if (s == NATS_OK) s = natsConnection_Connect(nc, opts);
  natsOptions_Destroy(opts);
  return s;
}

// One try at the readiness probe against one node: connect, make a replicated stream, delete it.
bool probe(const std::string& url, const NatsUsers& users, int replicas, std::string& why) {
  natsConnection* nc = nullptr;
  natsStatus s = connect_to(&nc, url, users);
  if (s != NATS_OK) {
    why = url + ": " + natsStatus_GetText(s);
    return false;
  }
  jsCtx* js = nullptr;
  s = natsConnection_JetStream(&js, nc, nullptr);
  bool ok = false;
  if (s == NATS_OK) {
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    const char* subjects[] = {"mh_test_ready"};
    sc.Name = "MH_TEST_READY";
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    sc.Replicas = replicas;
    sc.Storage = js_MemoryStorage;
    jsStreamInfo* si = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    s = js_AddStream(&si, js, &sc, nullptr, &code);
    if (si) jsStreamInfo_Destroy(si);
    ok = s == NATS_OK || code == JSStreamNameExistErr;
    if (ok)
      (void)js_DeleteStream(js, "MH_TEST_READY", nullptr, nullptr);
    else
      why =
          url + ": JetStream not ready (" + natsStatus_GetText(s) + ", " + std::to_string(static_cast<int>(code)) + ")";
    jsCtx_Destroy(js);
  }
  natsConnection_Destroy(nc);
  return ok;
}

// The nodes' `authorization` block: a user with a password, an NKey user, or both.
std::string authorization(const NatsUsers& users) {
  if (!users.authorization.empty()) return users.authorization + "\n";
  if (users.empty()) return "";
  std::string out = "authorization {\n  users: [\n";
  if (!users.user.empty()) out += "    { user: \"" + users.user + "\", password: \"" + users.password + "\" }\n";
  if (!users.nkey.empty()) out += "    { nkey: " + users.nkey + " }\n";
  return out + "  ]\n}\n";
}

}  // namespace

std::filesystem::path NatsCluster::server_binary() {
  for (const char* candidate : {"/usr/sbin/nats-server", "/usr/bin/nats-server"})
    if (std::filesystem::exists(candidate)) return candidate;
  return "nats-server";
}

NatsCluster::NatsCluster(const std::filesystem::path& dir, int n, NatsUsers users) : users_(std::move(users)) {
  auto ports = free_ports(2 * n);
  nodes_.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    nodes_[i].client_port = ports[2 * i];
    nodes_[i].route_port = ports[2 * i + 1];
  }
  for (int i = 0; i < n; ++i) {
    auto& node = nodes_[i];
    auto home = dir / ("n" + std::to_string(i));
    std::filesystem::create_directories(home / "store");
    node.config = home / "nats.conf";
    node.log = home / "nats.log";
    std::ofstream conf(node.config);
    conf << "server_name: n" << i << "\n"
         << "listen: 127.0.0.1:" << node.client_port << "\n"
         << "max_payload: 4MB\n"
         << "jetstream {\n  store_dir: \"" << (home / "store").string() << "\"\n  max_memory_store: 64MB\n"
         << "  max_file_store: 1GB\n}\n"
         << authorization(users_);
    if (n == 1) continue;  // a lone server: JetStream without a cluster
    conf << "cluster {\n  name: mh_test\n  listen: 127.0.0.1:" << node.route_port << "\n";
    // Routes that ask who connects, as docs/fleet.md's cluster block does.
    std::string route_login;
    if (!users_.route_user.empty()) {
      conf << "  authorization { user: \"" << users_.route_user << "\", password: \"" << users_.route_password
           << "\" }\n";
      route_login = users_.route_user + ":" + users_.route_password + "@";
    }
    conf << "  routes: [\n";
    for (int j = 0; j < n; ++j)
      if (j != i) conf << "    nats-route://" << route_login << "127.0.0.1:" << nodes_[j].route_port << "\n";
    conf << "  ]\n}\n";
  }
  for (int i = 0; i < n; ++i)
    start(i);
}

NatsCluster::~NatsCluster() {
  for (int i = 0; i < size(); ++i)
    kill(i);
}

void NatsCluster::start(int i) {
  auto& node = nodes_[i];
  if (node.process) return;
  std::vector<std::string> argv;
  // A test process that dies (a crash, a ctest timeout's SIGKILL) never reaches the destructor:
  // setpriv (util-linux) asks the kernel to SIGKILL the node when its parent goes, then execs
  // the server in place (the same pid, which kill() and StoppedNode use). Without setpriv the
  // node is started as it is.
  if (std::filesystem::exists("/usr/bin/setpriv")) argv = {"/usr/bin/setpriv", "--pdeathsig", "KILL", "--"};
  for (std::string arg :
       {server_binary().string(), std::string("-c"), node.config.string(), std::string("-l"), node.log.string()})
    argv.push_back(std::move(arg));
  node.process = std::make_unique<CliProcess>(std::move(argv));
}

void NatsCluster::kill(int i) {
  // CliProcess's destructor SIGKILLs and reaps its own pid.
  nodes_[i].process.reset();
}

int NatsCluster::pid(int i) const {
  return nodes_[i].process ? nodes_[i].process->pid() : -1;
}

std::uint16_t NatsCluster::route_port(int i) const {
  return nodes_[i].route_port;
}

std::string NatsCluster::url(int i) const {
  return "nats://127.0.0.1:" + std::to_string(nodes_[i].client_port);
}

std::vector<std::string> NatsCluster::urls() const {
  std::vector<std::string> out;
  for (int i = 0; i < size(); ++i)
    out.push_back(url(i));
  return out;
}

std::string NatsCluster::urls_toml() const {
  std::string out = "[";
  for (int i = 0; i < size(); ++i)
    out += (i ? ", \"" : "\"") + url(i) + "\"";
  return out + "]";
}

bool every_thread_stopped(int pid, std::chrono::milliseconds timeout) {
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  auto all_stopped = [&] {
    std::error_code ec;
    int seen = 0;
    for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
      std::ifstream in(task.path() / "stat");
      std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      // "pid (comm) S ...": the state follows the last ')' (a comm may hold one).
      auto close = stat.rfind(')');
      if (close == std::string::npos || close + 2 >= stat.size()) continue;  // a thread that just ended
      const char state = stat[close + 2];
      if (state != 'T' && state != 't') return false;
      ++seen;
    }
    return !ec && seen > 0;
  };
  return eventually(all_stopped, timeout);
}

std::string NatsCluster::log(int i) const {
  std::ifstream in(nodes_[i].log);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

namespace {

// One connection to the first running node of `urls`, for a test's JetStream questions.
struct Asker {
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  Asker(const std::vector<std::string>& urls, const NatsUsers& users) {
    for (const auto& u : urls)
      if (connect_to(&nc, u, users) == NATS_OK) break;
    if (nc && natsConnection_JetStream(&js, nc, nullptr) != NATS_OK) js = nullptr;
  }
  ~Asker() {
    if (js) jsCtx_Destroy(js);
    if (nc) natsConnection_Destroy(nc);
  }
};

}  // namespace

std::string NatsCluster::leader(const std::string& stream) const {
  std::vector<std::string> running;
  for (int i = 0; i < size(); ++i)
    if (nodes_[i].process) running.push_back(url(i));
  Asker a(running, users_);
  if (!a.js) return "";
  jsStreamInfo* si = nullptr;
  if (js_GetStreamInfo(&si, a.js, stream.c_str(), nullptr, nullptr) != NATS_OK) return "";
  std::string out = si->Cluster && si->Cluster->Leader ? si->Cluster->Leader : "";
  jsStreamInfo_Destroy(si);
  return out;
}

bool NatsCluster::move_leader(const std::string& stream, int node, bool on, std::chrono::milliseconds timeout) {
  const std::string name = "n" + std::to_string(node);
  return eventually(
      [&] {
        std::string now = leader(stream);
        if (now.empty()) return false;  // electing
        if ((now == name) == on) return true;
        std::vector<std::string> running;
        for (int i = 0; i < size(); ++i)
          if (nodes_[i].process) running.push_back(url(i));
        Asker a(running, users_);
        if (!a.nc) return false;
        natsMsg* reply = nullptr;
        const std::string subject = "$JS.API.STREAM.LEADER.STEPDOWN." + stream;
        if (natsConnection_RequestString(&reply, a.nc, subject.c_str(), "", 5000) == NATS_OK) natsMsg_Destroy(reply);
        return false;  // asked again once the next leader is known
      },
      timeout);
}

bool NatsCluster::ready(int replicas, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int i = 0; i < size(); ++i) {
    if (!nodes_[i].process) continue;
    // The servers elect their leaders meanwhile: a fact with no event of its own, polled, bounded.
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    const std::string node_url = url(i);
    if (!eventually([&] { return probe(node_url, users_, replicas, why_); }, left)) return false;
  }
  why_.clear();
  return true;
}

}  // namespace mh::test
