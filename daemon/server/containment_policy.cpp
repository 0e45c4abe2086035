#include "daemon/server/containment_policy.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>
#include <cerrno>
#include <charconv>

#include "daemon/file_modes.hpp"
#include "daemon/log.hpp"

namespace mh::daemon {

namespace fs = std::filesystem;

namespace {

using PolicyResult = boost::system::result<std::shared_ptr<const ContainmentPolicy>, std::string>;

PolicyResult refuse(std::string message) {
  return PolicyResult(boost::system::in_place_error, std::move(message));
}

// The directory of this program (metaharness's own hook programs ship beside it).
std::optional<fs::path> own_bin_dir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  return self.parent_path();
}

// Runs argv to its end (fork + exec, no shell, stdio to /dev/null), first moving the child into a
// cgroup when `join_cgroup_fd` is one; its exit status, or -1. Called at start, before the io
// threads exist.
int run_probe(const std::vector<std::string>& argv, int join_cgroup_fd = -1) {
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
    }
    if (join_cgroup_fd >= 0 && ::write(join_cgroup_fd, "0", 1) != 1) ::_exit(126);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) == -1 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

PolicyResult make_containment_policy(const DaemonConfig& config, const std::optional<fs::path>& config_file) {
  auto policy = std::make_shared<ContainmentPolicy>();
  // A start refused after the cgroup parent was made leaves none behind.
  struct RemoveParentUnlessKept {
    ContainmentPolicy& policy;
    bool keep = false;
    ~RemoveParentUnlessKept() {
      if (!keep && policy.cgroups) (void)policy.cgroups->remove();
    }
  } parent_guard{*policy};
  policy->daemon_is_root = ::geteuid() == 0;
  policy->default_limits = {config.memory_max_bytes, config.pids_max, config.cpu_max_percent};

  // Cgroups.
  if (config.cgroup_root == "none") {
    policy->no_cgroups_why = "runs.cgroup_root is \"none\"";
  } else {
    std::optional<fs::path> base =
        config.cgroup_root.empty() ? CgroupParent::own_cgroup_dir() : std::optional<fs::path>(config.cgroup_root);
    if (!base) {
      policy->no_cgroups_why = "this host has no cgroup2 mount";
    } else {
      auto parent = CgroupParent::open(*base, CgroupParent::group_for_state_dir(config.state_dir));
      if (parent)
        policy->cgroups.emplace(std::move(*parent));
      else if (!config.cgroup_root.empty())
        return refuse("runs.cgroup_root: " + parent.error());
      else
        policy->no_cgroups_why = parent.error();
    }
  }
  // Making a group is not enough: a process must be able to move into one (a delegated subtree
  // can be writable without that). Probe it once with /bin/true.
  if (policy->cgroups) {
    std::string probe_id = "probe-" + std::to_string(::getpid());
    auto group = policy->cgroups->create(probe_id, {});
    int status = group ? run_probe({"/bin/true"}, (*group)->procs_fd()) : -1;
    if (status != 0) {
      std::string why =
          group ? "a process cannot be moved into a group under " + policy->cgroups->dir().string() : group.error();
      if (!config.cgroup_root.empty()) return refuse("runs.cgroup_root: " + why);
      if (group) group->reset();  // the probe group first: the parent goes only when empty
      (void)policy->cgroups->remove();
      policy->cgroups.reset();
      policy->no_cgroups_why = why;
    }
  }
  if (!policy->cgroups && policy->default_limits.any())
    return refuse(
        "runs.memory_max_bytes, pids_max and cpu_max_percent need a cgroup of each run's own, and there "
        "is none: " +
        policy->no_cgroups_why);
  if (policy->cgroups)
    if (auto refusal = policy->cgroups->refuse_limits(policy->default_limits)) return refuse("runs: " + *refusal);

  // The sandbox.
  SandboxSpec& spec = policy->sandbox_spec;
  bool have_bwrap = ::access(spec.bwrap.c_str(), X_OK) == 0;
  if (config.sandbox == "none") {
    policy->no_sandbox_why = "runs.sandbox is \"none\"";
  } else if (!have_bwrap) {
    if (config.sandbox == "bwrap") return refuse("runs.sandbox: \"bwrap\" needs " + spec.bwrap.string());
    policy->no_sandbox_why = spec.bwrap.string() + " is not installed";
  } else if (run_probe({spec.bwrap.string(), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--",
                        "/bin/true"}) != 0) {
    // Installed but unable to build a sandbox here (e.g. no user namespaces for this user).
    if (config.sandbox == "bwrap") return refuse("runs.sandbox: \"bwrap\" cannot build a sandbox on this host");
    policy->no_sandbox_why = spec.bwrap.string() + " cannot build a sandbox on this host";
  } else {
    policy->sandbox = true;
  }
  spec.read_only.push_back(config.vendor.vendor_dir);
  for (const auto& [name, binary] : config.vendor.binaries)
    spec.read_only.push_back(binary.parent_path());
  if (auto bin = own_bin_dir()) spec.read_only.push_back(*bin);
  for (const fs::path& path : config.sandbox_read_only)
    spec.read_only.push_back(path);
  spec.hidden = {config.state_dir, config.socket};
  if (config_file) spec.hidden.push_back(*config_file);
  // The fleet's NATS credentials: whoever holds them is a host of the fleet (docs/fleet.md, Trust).
  if (config.fleet && !config.fleet->credentials.empty()) spec.hidden.push_back(config.fleet->credentials);
  // The upstreams' keys (docs/gateway.md): read by the runs' supervisors only, never by a run. The
  // sandbox shows the host read-only, so each key's file is hidden, and systemd's credentials
  // directory whole.
  for (const auto& [name, upstream] : config.upstreams)
    spec.hidden.push_back(upstream.credential_name ? upstream.credential_path.parent_path() : upstream.credential_path);

  // The runs' identity.
  if (!config.run_user.empty()) {
    if (!policy->daemon_is_root) return refuse("runs.user: only a root daemon can run its runs as another user");
    const struct passwd* pw = nullptr;
    unsigned long uid = 0;
    const std::string& u = config.run_user;
    auto [end, ec] = std::from_chars(u.data(), u.data() + u.size(), uid);
    pw =
        (ec == std::errc() && end == u.data() + u.size()) ? ::getpwuid(static_cast<uid_t>(uid)) : ::getpwnam(u.c_str());
    if (!pw) return refuse("runs.user: no user \"" + u + "\" on this host");
    if (pw->pw_uid == 0) return refuse("runs.user: \"" + u + "\" is root; runs never run as root");
    policy->fixed_user = SandboxSpec::RunAs{pw->pw_uid, pw->pw_gid};
  }
  policy->uids = std::make_shared<RunUidPool>();
  // A root daemon's unsandboxed runs (each its own uid) must pass through the state directory
  // and runs/ to reach their scratch: there they are 0711, so a run may pass but list nothing
  // (each run's own directory lets its group in: RunContainment::prepare).
  if (policy->daemon_is_root && !policy->sandbox) {
    std::error_code ec;
    for (const fs::path& dir : {config.state_dir, config.state_dir / "runs"}) {
      make_directories(dir, ec);
      if (ec || ::chmod(dir.c_str(), 0711) == -1) return refuse("cannot let the runs pass through " + dir.string());
    }
  }
  parent_guard.keep = true;
  return std::shared_ptr<const ContainmentPolicy>(std::move(policy));
}

boost::json::object containment_facts(const ContainmentPolicy& p) {
  boost::json::object o, unavailable;
  o["end"] = p.cgroups ? "cgroup" : "marker-sweep";
  if (p.cgroups) {
    boost::json::array controllers;
    for (const auto& c : p.cgroups->controllers())
      controllers.emplace_back(c);
    o["cgroup"] = boost::json::object{{"dir", p.cgroups->dir().string()}, {"controllers", std::move(controllers)}};
  } else {
    o["cgroup"] = nullptr;
    unavailable["cgroup"] = p.no_cgroups_why;
  }
  o["sandbox"] = p.sandbox ? "bwrap" : "none";
  if (!p.sandbox) unavailable["sandbox"] = p.no_sandbox_why;
  o["identity"] = !p.daemon_is_root ? "daemon-user" : p.fixed_user ? "runs.user" : "uid-per-run";
  o["unavailable"] = std::move(unavailable);
  return o;
}

boost::system::result<NetworkDecision, std::string> decide_network(const DaemonConfig& config,
                                                                   const ContainmentPolicy& policy) {
  using Result = boost::system::result<NetworkDecision, std::string>;
  if (config.network == "host") return NetworkDecision{false, ""};
  std::string missing;
  if (!policy.sandbox)
    missing = "the runs are not sandboxed (" + policy.no_sandbox_why + ")";
  else if (!config.supervise)
    missing = "runs.supervise is false, and the run's gateway lives in its supervisor";
  else if (run_probe({policy.sandbox_spec.bwrap.string(), "--unshare-net", "--ro-bind", "/", "/", "--proc", "/proc",
                      "--dev", "/dev", "--", "/bin/true"}) != 0)
    missing = policy.sandbox_spec.bwrap.string() + " cannot give a run a network namespace of its own on this host";
  if (missing.empty()) return NetworkDecision{true, ""};
  if (config.network == "gateway")
    return Result(boost::system::in_place_error, "runs.network: \"gateway\" cannot be built: " + missing +
                                                     " (set runs.network = \"host\" to run "
                                                     "on the host's network, unconfined)");
  return NetworkDecision{false, missing};
}

boost::json::object containment_facts(const ContainmentPolicy& policy, const NetworkDecision& network) {
  boost::json::object o = containment_facts(policy);
  o["network"] = network.own_network ? "gateway" : "host";
  if (!network.own_network && !network.why_host.empty()) o["unavailable"].as_object()["network"] = network.why_host;
  return o;
}

ContainmentCleanup::~ContainmentCleanup() {
  if (!policy_ || !policy_->cgroups) return;
  if (auto removed = policy_->cgroups->remove(); !removed)
    log(LogPriority::notice, "runs' cgroups: " + removed.error());
}

bool cwd_within_roots(const fs::path& cwd, const std::vector<fs::path>& roots) {
  if (!cwd.is_absolute()) return false;
  std::error_code ec;
  fs::path resolved = fs::weakly_canonical(cwd, ec);
  if (ec) return false;
  for (const fs::path& root : roots) {
    fs::path r = fs::weakly_canonical(root, ec);
    if (ec) continue;
    auto [ri, ci] = std::mismatch(r.begin(), r.end(), resolved.begin(), resolved.end());
    if (ri == r.end() || (std::next(ri) == r.end() && ri->empty())) return true;
  }
  return false;
}

}  // namespace mh::daemon
