#include "daemon/process/run_containment.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>

#include "daemon/process/run_processes.hpp"
#include "daemon/process/unique_fd.hpp"

namespace mh::daemon {

namespace fs = std::filesystem;

std::optional<uid_t> RunUidPool::acquire(const std::string& run_id) {
  constexpr uid_t span = kLast - kFirst + 1;
  std::lock_guard lock(mutex_);
  uid_t start = kFirst + static_cast<uid_t>(std::hash<std::string>{}(run_id) % span);
  for (uid_t i = 0; i < span; ++i) {
    uid_t uid = kFirst + (start - kFirst + i) % span;
    if (taken_.insert(uid).second) return uid;
  }
  return std::nullopt;
}

bool RunUidPool::claim(uid_t uid) {
  std::lock_guard lock(mutex_);
  return taken_.insert(uid).second;
}

void RunUidPool::release(uid_t uid) {
  std::lock_guard lock(mutex_);
  taken_.erase(uid);
}

namespace {

bool is_under(const fs::path& path, const fs::path& root) {
  auto p = path.lexically_normal().string(), r = root.lexically_normal().string();
  return p == r || (p.size() > r.size() && p.compare(0, r.size(), r) == 0 && (r.back() == '/' || p[r.size()] == '/'));
}

// Gives the run's own directories and files to its uid: each directory the plan creates, every
// file the daemon wrote in them, and its cwd when that is inside the run's directory.
std::optional<std::string> hand_over(const adapters::LaunchPlan& plan, const fs::path& run_dir, uid_t uid, gid_t gid) {
  std::vector<fs::path> roots = plan.directories;
  if (is_under(plan.cwd, run_dir)) roots.push_back(plan.cwd);
  for (const fs::path& root : roots) {
    std::error_code ec;
    if (::lchown(root.c_str(), uid, gid) == -1) return "cannot give " + root.string() + " to the run's user";
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (::lchown(it->path().c_str(), uid, gid) == -1)
        return "cannot give " + it->path().string() + " to the run's user";
    if (ec) return "cannot walk " + root.string() + ": " + ec.message();
  }
  for (const auto& file : plan.files)
    if (::lchown(file.path.c_str(), uid, gid) == -1 && errno != ENOENT)
      return "cannot give " + file.path.string() + " to the run's user";
  for (const auto& link : plan.links)  // the link itself, never its (shared, read-only) target
    if (::lchown(link.path.c_str(), uid, gid) == -1 && errno != ENOENT)
      return "cannot give " + link.path.string() + " to the run's user";
  return std::nullopt;
}

// A small file with exactly `mode`, whatever the umask.
std::optional<std::string> write_file(const fs::path& path, std::string_view text, mode_t mode) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd || ::fchmod(fd.get(), mode) == -1) return "cannot write " + path.string() + ": " + std::strerror(errno);
  if (!write_all(fd.get(), text)) return "cannot write " + path.string() + ": " + std::strerror(errno);
  return std::nullopt;
}

std::string limit_names(const CgroupLimits& limits) {
  std::string names;
  auto add = [&](bool set, const char* name) {
    if (!set) return;
    if (!names.empty()) names += ", ";
    names += name;
  };
  add(bool(limits.memory_max_bytes), "memory.max");
  add(bool(limits.pids_max), "pids.max");
  add(bool(limits.cpu_max_percent), "cpu.max");
  return names;
}

}  // namespace

boost::system::result<std::unique_ptr<RunContainment>, std::string> RunContainment::prepare(
    const ContainmentPolicy& policy, const std::string& run_id, const fs::path& run_dir,
    const adapters::LaunchPlan& plan, const CgroupLimits& requested,
    const std::optional<SandboxSpec::OwnNetwork>& own_network, const std::optional<DirectoryIdentity>& cwd_identity) {
  std::unique_ptr<RunContainment> c(new RunContainment());
  c->plan_ = plan;
  c->unsandboxed_ = plan;
  if (own_network && !policy.sandbox)
    return "network = \"gateway\" needs the sandbox, and there is none: " + policy.no_sandbox_why;

  CgroupLimits limits = requested;
  if (!limits.memory_max_bytes) limits.memory_max_bytes = policy.default_limits.memory_max_bytes;
  if (!limits.pids_max) limits.pids_max = policy.default_limits.pids_max;
  if (!limits.cpu_max_percent) limits.cpu_max_percent = policy.default_limits.cpu_max_percent;

  if (policy.cgroups) {
    auto group = policy.cgroups->create(run_id, limits);
    if (!group) return group.error();
    c->cgroup_ = std::move(*group);
  } else {
    if (limits.any())
      return limit_names(limits) + " needs a cgroup of the run's own, and there is none: " + policy.no_cgroups_why;
    c->warnings_.emplace_back("CGROUP_UNAVAILABLE",
                              "no cgroup of the run's own (" + policy.no_cgroups_why +
                                  "): its processes are found at its end by their environment marker, which a "
                                  "process that drops its environment escapes");
  }

  if (policy.daemon_is_root) {
    SandboxSpec::RunAs who;
    if (policy.fixed_user) {
      who = *policy.fixed_user;
    } else {
      auto uid = policy.uids ? policy.uids->acquire(run_id) : std::nullopt;
      if (!uid) return std::string("no unprivileged uid is free for the run");
      c->uid_pool_ = policy.uids;
      who = {*uid, static_cast<gid_t>(*uid)};
    }
    c->identity_ = SpawnOptions::Identity{who.uid, who.gid};
    if (auto problem = hand_over(plan, run_dir, who.uid, who.gid)) return *problem;
    // Unsandboxed, the run reaches its scratch through its run directory and the directories
    // between it and the plan's (0750, the daemon's): their group becomes the run's so it may
    // pass; the record's files stay the daemon's, 0640, unreadable to it. (Sandboxed, the view
    // remakes the directories above the scratch.)
    if (!policy.sandbox)
      for (const fs::path& made : plan.directories)
        for (fs::path dir = made.parent_path(); is_under(dir, run_dir); dir = dir.parent_path()) {
          if (::chown(dir.c_str(), static_cast<uid_t>(-1), who.gid) == -1)
            return "cannot give " + dir.string() + " to the run's group: " + std::strerror(errno);
          if (dir == run_dir || dir == dir.parent_path()) break;
        }
  }

  if (policy.sandbox) {
    SandboxSpec spec = policy.sandbox_spec;
    spec.cwd_identity = cwd_identity;
    // The vendor's environment reaches it only through the last hop: without it nothing starts.
    if (::access(spec.exec_helper.c_str(), X_OK) == -1)
      return "the sandbox's last hop " + spec.exec_helper.string() +
             " (mh-exec, which applies the vendor's environment after the drop to the run's user) is missing or "
             "not executable: " +
             std::strerror(errno);
    if (c->identity_) {
      spec.run_as = SandboxSpec::RunAs{c->identity_->uid, c->identity_->gid};
      std::string uid = std::to_string(c->identity_->uid), gid = std::to_string(c->identity_->gid);
      fs::path home;
      for (const auto& [name, value] : plan.env)
        if (name == "HOME") home = value;
      fs::path passwd = run_dir / "sandbox-passwd", group = run_dir / "sandbox-group";
      std::string passwd_text = "root:x:0:0:root:/root:/usr/sbin/nologin\nmh-run:x:" + uid + ":" + gid +
                                ":metaharness run " + run_id + ":" +
                                (home.empty() ? std::string("/nonexistent") : home.string()) +
                                ":/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
      std::string group_text = "root:x:0:\nmh-run:x:" + gid + ":\nnogroup:x:65534:\n";
      if (auto problem = write_file(passwd, passwd_text, 0644)) return *problem;
      if (auto problem = write_file(group, group_text, 0644)) return *problem;
      spec.passwd_file = passwd;
      spec.group_file = group;
    }
    if (own_network) {
      // The gate: the daemon's, 0755 (the run reaches its sockets, adds nothing beside them).
      const fs::path& gate = own_network->gate_dir;
      if (::mkdir(gate.c_str(), 0755) == -1 && errno != EEXIST)
        return "cannot create " + gate.string() + ": " + std::strerror(errno);
      struct stat st {};
      if (::lstat(gate.c_str(), &st) == -1 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid())
        return gate.string() + " is not a directory of the daemon's own";
      if (::chmod(gate.c_str(), 0755) == -1) return "cannot make " + gate.string() + " 0755: " + std::strerror(errno);
      spec.own_network = own_network;
    }
    c->plan_ = daemon::sandboxed(plan, spec);
    c->sandbox_spec_ = spec;
    c->sandboxed_ = true;
  } else {
    c->warnings_.emplace_back("SANDBOX_UNAVAILABLE",
                              "the run sees the host's filesystem as " +
                                  std::string(c->identity_ ? "its own user" : "the daemon's user") + ": " +
                                  policy.no_sandbox_why);
  }
  return c;
}

RunContainment::Record RunContainment::record() const {
  Record r;
  r.cgroup = cgroup_dir();
  r.identity = identity_;
  r.sandboxed = sandboxed_;
  return r;
}

std::optional<fs::path> RunContainment::cgroup_dir() const {
  if (cgroup_) return cgroup_->dir();
  return std::nullopt;
}

std::optional<std::string> RunContainment::write_record(const fs::path& file, const Record& r) {
  boost::json::object o;
  o["cgroup"] = r.cgroup ? boost::json::value(r.cgroup->string()) : boost::json::value(nullptr);
  o["uid"] = r.identity ? boost::json::value(r.identity->uid) : boost::json::value(nullptr);
  o["gid"] = r.identity ? boost::json::value(r.identity->gid) : boost::json::value(nullptr);
  o["sandboxed"] = r.sandboxed;
  return write_file(file, boost::json::serialize(o) + "\n", 0640);
}

boost::system::result<RunContainment::Record, std::string> RunContainment::read_record(const fs::path& file) {
  using Result = boost::system::result<Record, std::string>;
  auto fail = [&](const std::string& why) { return Result(boost::system::in_place_error, file.string() + ": " + why); };
  std::ifstream in(file);
  if (!in) return fail("cannot be read");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) return fail("is not a JSON object");
  const auto& o = v.get_object();
  Record r;
  const auto* cgroup = o.if_contains("cgroup");
  const auto* uid = o.if_contains("uid");
  const auto* gid = o.if_contains("gid");
  const auto* sandboxed = o.if_contains("sandboxed");
  if (!cgroup || !uid || !gid || !sandboxed || !sandboxed->is_bool())
    return fail("lacks cgroup, uid, gid or sandboxed");
  if (cgroup->is_string()) r.cgroup = fs::path(std::string(cgroup->get_string()));
  if (uid->is_uint64() || uid->is_int64()) {
    auto u = uid->to_number<std::int64_t>(ec), g = gid->to_number<std::int64_t>(ec);
    if (ec || u < 0 || g < 0 || u > 0xfffffffe || g > 0xfffffffe) return fail("uid or gid out of range");
    r.identity = SpawnOptions::Identity{static_cast<uid_t>(u), static_cast<gid_t>(g)};
  }
  r.sandboxed = sandboxed->get_bool();
  return r;
}

boost::system::result<std::unique_ptr<RunContainment>, std::string> RunContainment::adopt(
    const ContainmentPolicy& policy, const std::string& run_id, const adapters::LaunchPlan& plan, const Record& r) {
  std::unique_ptr<RunContainment> c(new RunContainment());
  c->plan_ = plan;
  c->sandboxed_ = r.sandboxed;
  c->identity_ = r.identity;
  if (r.cgroup) {
    if (!policy.cgroups) return std::string("the run had a cgroup, and this daemon has none: ") + policy.no_cgroups_why;
    if (policy.cgroups->dir() / run_id != *r.cgroup)
      return "the run's cgroup " + r.cgroup->string() + " is not under this daemon's " + policy.cgroups->dir().string();
    auto group = policy.cgroups->find(run_id);
    if (!group) return group.error();
    c->cgroup_ = std::move(*group);
  }
  if (r.identity && !policy.fixed_user && policy.uids && r.identity->uid >= RunUidPool::kFirst &&
      r.identity->uid <= RunUidPool::kLast) {
    if (!policy.uids->claim(r.identity->uid))
      return "the run's uid " + std::to_string(r.identity->uid) + " is another run's already";
    c->uid_pool_ = policy.uids;
  }
  return c;
}

RunContainment::~RunContainment() {
  if (uid_pool_ && identity_) uid_pool_->release(identity_->uid);
}

SpawnOptions RunContainment::spawn_options() const {
  SpawnOptions options;
  if (cgroup_) options.join_cgroup_fd = cgroup_->procs_fd();
  // Sandboxed, the drop to the run's user happens inside the sandbox (setpriv), after bwrap built
  // the view as root.
  if (!sandboxed_) options.identity = identity_;
  return options;
}

std::optional<uid_t> RunContainment::uid() const {
  if (identity_) return identity_->uid;
  return std::nullopt;
}

boost::asio::awaitable<std::string> RunContainment::end(boost::asio::any_io_executor executor,
                                                        std::optional<pid_t> root, std::chrono::milliseconds timeout) {
  if (!cgroup_) {
    KillReport report = co_await kill_run_processes(executor, root, plan_.run_marker, timeout);
    co_return report.clean() ? std::string() : report.summary();
  }
  if (ended_) co_return std::string();
  std::string problems;
  if (auto killed = cgroup_->kill(); !killed) problems = killed.error();
  if (!co_await cgroup_->wait_empty(executor, timeout))
    problems += std::string(problems.empty() ? "" : "; ") + "processes still in " + cgroup_->dir().string() +
                " after " + std::to_string(timeout.count()) + " ms";
  facts_ = cgroup_->facts();
  if (!cgroup_->populated())
    if (auto removed = cgroup_->remove(); !removed) problems += (problems.empty() ? "" : "; ") + removed.error();
  // Once empty and removed there is nothing left to end, and the counters read are the last.
  ended_ = problems.empty();
  co_return problems;
}

adapters::LaunchPlan RunContainment::plan_with(const std::vector<std::string>& extra_args) const {
  adapters::LaunchPlan again = unsandboxed_;
  again.args.insert(again.args.end(), extra_args.begin(), extra_args.end());
  return sandbox_spec_ ? daemon::sandboxed(again, *sandbox_spec_) : again;
}

boost::asio::awaitable<std::string> RunContainment::sweep(boost::asio::any_io_executor executor,
                                                          std::chrono::milliseconds timeout) {
  if (!cgroup_) {
    KillReport report = co_await kill_run_processes(executor, std::nullopt, plan_.run_marker, timeout);
    co_return report.clean() ? std::string() : report.summary();
  }
  std::string problems;
  if (auto killed = cgroup_->kill(); !killed) problems = killed.error();
  if (!co_await cgroup_->wait_empty(executor, timeout))
    problems += std::string(problems.empty() ? "" : "; ") + "processes still in " + cgroup_->dir().string() +
                " after " + std::to_string(timeout.count()) + " ms";
  co_return problems;
}

std::optional<protocol::ev::RunResources> RunContainment::resources() const {
  if (!cgroup_) return std::nullopt;
  return run_resources(facts_ ? *facts_ : cgroup_->facts());
}

protocol::ev::RunResources run_resources(const CgroupFacts& f) {
  return protocol::ev::RunResources{f.cpu_usec, f.memory_peak_bytes, f.tasks_peak, f.oom_kills, f.processes_killed};
}

protocol::ProcessTermination RunContainment::vendor_termination(const protocol::ProcessTermination& spawned) const {
  if (!sandboxed_ || spawned.kind != protocol::ProcessKind::exited || spawned.code <= 128 || spawned.code > 128 + 64)
    return spawned;
  protocol::ProcessTermination t;
  t.kind = protocol::ProcessKind::signaled;
  t.signal = spawned.code - 128;
  return t;
}

}  // namespace mh::daemon
