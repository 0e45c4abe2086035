#include "daemon/process/sandbox.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "adapters/host_config.hpp"
#include "daemon/process/exec_handoff.hpp"

namespace mh::daemon {

namespace fs = std::filesystem;

namespace {

// The system's read-only part: directories bound as they are.
constexpr const char* kSystemDirs[] = {"/usr", "/etc"};
// Top-level names that Debian (merged /usr) makes links into /usr; mirrored as links where they
// are links on the host, bound read-only where they are directories.
constexpr const char* kSystemLinks[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};

bool is_under(const fs::path& path, const fs::path& root) {
  auto p = path.lexically_normal();
  auto r = root.lexically_normal();
  auto [pi, ri] = std::mismatch(p.begin(), p.end(), r.begin(), r.end());
  return ri == r.end() || (std::next(ri) == r.end() && ri->empty());  // "root/" ends in an empty element
}

bool path_exists(const fs::path& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0;
}

bool is_dir(const fs::path& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

void add(std::vector<std::string>& args, std::initializer_list<std::string> more) {
  args.insert(args.end(), more);
}

}  // namespace

std::vector<std::string> sandbox_args(const adapters::LaunchPlan& plan, const SandboxSpec& spec) {
  std::vector<std::string> args;
  // Its own session: no terminal ioctl (TIOCSTI) can reach a terminal outside. Its own PID
  // namespace (its /proc shows only its processes: no other run's argv, environ or cwd, nothing
  // to signal) and IPC namespace (no SysV object shared with, or outliving into, the host). bwrap
  // still reports the vendor's exit as soon as the vendor exits; the namespace's pid 1 (bwrap's
  // reaper, which carries the run marker) holds what the run left until the run's end kills it.
  add(args, {"--new-session", "--unshare-pid", "--unshare-ipc"});
  // network = "gateway": a network namespace of its own, loopback only (bwrap brings `lo` up). The
  // host's loopback services, its interfaces and every abstract Unix socket of the host are out of
  // reach; the gate directory bound below is the only way out.
  if (spec.own_network) add(args, {"--unshare-net"});
  std::vector<fs::path> bound;  // sources whose host contents are visible inside
  for (const char* dir : kSystemDirs)
    if (is_dir(dir)) {
      add(args, {"--ro-bind", dir, dir});
      bound.emplace_back(dir);
    }
  for (const char* name : kSystemLinks) {
    std::error_code ec;
    if (fs::is_symlink(name, ec)) {
      add(args, {"--symlink", fs::read_symlink(name, ec).string(), name});
    } else if (is_dir(name)) {
      add(args, {"--ro-bind", name, name});
      bound.emplace_back(name);
    }
  }
  add(args, {"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"});
  // bwrap makes the missing parents of a mount point 0700, so a run that is not root could not
  // reach what is bound below them: make them 0755 first (they hold nothing but mount points).
  std::vector<fs::path> made = {"/tmp", "/proc", "/dev"};
  auto make_parents = [&](const fs::path& path) {
    fs::path normal = path.lexically_normal();
    fs::path at = "/";
    for (auto part = std::next(normal.begin()); part != normal.end() && std::next(part) != normal.end(); ++part) {
      at /= *part;
      bool exists_inside = std::any_of(made.begin(), made.end(), [&](const fs::path& m) { return m == at; }) ||
                           std::any_of(bound.begin(), bound.end(), [&](const fs::path& b) { return is_under(at, b); });
      if (exists_inside) continue;
      add(args, {"--perms", "0755", "--dir", at.string()});
      made.push_back(at);
    }
  };
  for (const fs::path& path : spec.read_only)
    if (path_exists(path)) {
      make_parents(path);
      add(args, {"--ro-bind", path.string(), path.string()});
      bound.push_back(path);
    }
  // The last hop must be there inside (it is, under /usr, once installed; a build tree binds it).
  if (!spec.exec_helper.empty() && path_exists(spec.exec_helper) &&
      std::none_of(bound.begin(), bound.end(), [&](const fs::path& b) { return is_under(spec.exec_helper, b); })) {
    make_parents(spec.exec_helper);
    add(args, {"--ro-bind", spec.exec_helper.string(), spec.exec_helper.string()});
    bound.push_back(spec.exec_helper);
  }

  std::vector<fs::path> writable;
  writable.push_back(plan.cwd);
  for (const fs::path& dir : plan.directories)
    writable.push_back(dir);
  for (const fs::path& path : spec.writable)
    if (path_exists(path)) writable.push_back(path);
  // Outer directories first, so an inner bind is not shadowed by its parent's; drop repeats and
  // paths inside one already bound (they are visible through it).
  std::sort(writable.begin(), writable.end(),
            [](const fs::path& a, const fs::path& b) { return a.lexically_normal() < b.lexically_normal(); });
  std::vector<fs::path> kept;
  for (const fs::path& path : writable)
    if (std::none_of(kept.begin(), kept.end(), [&](const fs::path& k) { return is_under(path, k); }))
      kept.push_back(path);
  // The operator's working directory (a cwd the plan did not make) lives where the run's
  // submitter may rename or link things: it is bound from a descriptor the spawner opens without
  // following a link (exec_handoff.hpp), never by a path bwrap would resolve again as root.
  const bool operator_cwd =
      std::find(plan.directories.begin(), plan.directories.end(), plan.cwd) == plan.directories.end();
  auto bind_writable = [&](const fs::path& path) {
    if (operator_cwd && path.lexically_normal() == plan.cwd.lexically_normal())
      add(args, {"--bind-fd", opened_path_arg(path.string(), spec.cwd_identity), path.string()});
    else
      add(args, {"--bind", path.string(), path.string()});
  };
  for (const fs::path& path : kept) {
    make_parents(path);
    bind_writable(path);
    bound.push_back(path);
  }

  // Hidden paths whose contents would show through a bound path: covered, then any writable path
  // inside them bound again on top.
  for (const fs::path& path : spec.hidden) {
    bool visible = std::any_of(bound.begin(), bound.end(), [&](const fs::path& b) { return is_under(path, b); });
    if (!visible || !path_exists(path)) continue;
    if (is_dir(path))
      add(args, {"--tmpfs", path.string()});
    else
      add(args, {"--ro-bind", "/dev/null", path.string()});
    for (const fs::path& w : kept) {
      if (!is_under(w, path)) continue;
      // The cover is empty: remake, 0755, the directories between it and the writable path.
      std::vector<fs::path> between;
      for (fs::path at = w.lexically_normal().parent_path(); is_under(at, path) && at != path.lexically_normal();
           at = at.parent_path())
        between.push_back(at);
      for (auto it = between.rbegin(); it != between.rend(); ++it)
        add(args, {"--perms", "0755", "--dir", it->string()});
      bind_writable(w);
    }
  }

  // The gate: the gateway's, the egress proxy's and the hook channel's sockets, read-only (a
  // socket is connected to, never written as a file; nothing can be added beside them).
  if (spec.own_network) {
    make_parents(fs::path(kGateInView) / "x");
    add(args, {"--ro-bind", spec.own_network->gate_dir.string(), kGateInView});
  }
  if (spec.passwd_file) add(args, {"--ro-bind", spec.passwd_file->string(), "/etc/passwd"});
  if (spec.group_file) add(args, {"--ro-bind", spec.group_file->string(), "/etc/group"});
  // The root itself (bwrap's own tmpfs holding the mount points) read-only: nothing but the
  // writable binds and /tmp takes a write.
  add(args, {"--remount-ro", "/", "--chdir", plan.cwd.string()});
  return args;
}

fs::path default_exec_helper() {
  return adapters::helper_program("mh-exec");
}

adapters::LaunchPlan sandboxed(const adapters::LaunchPlan& plan, const SandboxSpec& spec) {
  adapters::LaunchPlan out = plan;
  out.program = spec.bwrap;
  out.args = sandbox_args(plan, spec);
  // The hops before the vendor start from this environment, whatever the plan's: the run marker
  // (the marker sweep finds a run's processes by it, the hops included).
  out.env.clear();
  if (!plan.run_marker.first.empty()) out.env.push_back(plan.run_marker);
  out.handed_env = plan.env;
  if (spec.run_as) {
    out.args.insert(out.args.end(),
                    {"--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--", spec.setpriv.string(),
                     "--reuid=" + std::to_string(spec.run_as->uid), "--regid=" + std::to_string(spec.run_as->gid),
                     "--clear-groups", "--inh-caps=-all"});
  }
  out.args.insert(out.args.end(), {"--", spec.exec_helper.string()});
  if (spec.own_network) {
    for (const SandboxSpec::Relay& relay : spec.own_network->relays)
      out.args.insert(out.args.end(), {"--relay", std::to_string(relay.port) + "=" + relay.socket.string()});
    // Abstract sockets are per network namespace: the hook channel moves to a path socket in the
    // gate, bound by its listener at `bound_at` and reached by the vendor's hook programs inside.
    if (out.hook_channel) {
      const std::string name = "hook.sock";
      out.hook_channel->address = (fs::path(kGateInView) / name).string();
      out.hook_channel->bound_at = spec.own_network->gate_dir / name;
      for (auto& [variable, value] : *out.handed_env)
        if (variable == out.hook_channel->env_var) value = out.hook_channel->address;
    }
  }
  out.args.push_back("--");
  out.args.push_back(plan.program.string());
  out.args.insert(out.args.end(), plan.args.begin(), plan.args.end());
  out.notes.push_back("sandboxed with " + spec.bwrap.string() + ": the system read-only, writable only " +
                      plan.cwd.string() + " and the run's scratch");
  if (spec.own_network)
    out.notes.push_back("a network namespace of its own, loopback only: its way out is " +
                        spec.own_network->gate_dir.string() + ", bound at " + kGateInView);
  return out;
}

}  // namespace mh::daemon
