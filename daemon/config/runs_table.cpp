// [runs]: how many runs, their timings and lines, their body (docs/containment.md) and whether a
// supervisor holds each one (docs/supervisor.md). One reader over the table, its keys read in three
// groups in the order below (the first refusal is the one reported).
#include <chrono>
#include <string>
#include <string_view>

#include "adapters/run_spec.hpp"
#include "daemon/config/table_reader.hpp"
#include "daemon/config/tables.hpp"
#include "protocol/line_cut.hpp"

namespace mh::daemon::config_tables {

namespace {

// How many runs, their graces and deadlines, their line bounds.
void read_run_timings(TableReader& r, DaemonConfig& c) {
  r.read<std::size_t>("max_active", c.max_active_runs,
                      [](const std::size_t& v) { return v > 0 ? "" : "must be at least 1"; });
  std::int64_t halt = c.halt_grace.count(), exit_grace = c.exit_grace.count(), shutdown = c.shutdown_grace.count(),
               idle = c.idle_timeout.count();
  r.read<std::int64_t>("halt_grace_ms", halt, positive_ms);
  r.read<std::int64_t>("exit_grace_ms", exit_grace, positive_ms);
  r.read<std::int64_t>("shutdown_grace_ms", shutdown, positive_ms);
  r.read<std::int64_t>("idle_timeout_ms", idle);
  r.read<std::uint64_t>("decision_deadline_ms", c.decision_deadline_ms,
                        [](const std::uint64_t& v) { return v > 0 ? "" : "must be positive"; });
  std::int64_t stall_after_s = c.stall_after.count();
  r.read<std::int64_t>("stall_after_s", stall_after_s, [](const std::int64_t& v) -> std::string {
    if (v >= 0 && static_cast<std::uint64_t>(v) <= adapters::kMaxStallAfterMs / 1000) return "";
    return "must be between 0 (never) and " + std::to_string(adapters::kMaxStallAfterMs / 1000) + " (30 days)";
  });
  c.stall_after = std::chrono::seconds(stall_after_s);
  std::int64_t park_after_s = c.park_after ? c.park_after->count() : 0;
  r.read<std::int64_t>("park_after_s", park_after_s, [](const std::int64_t& v) -> std::string {
    if (v >= 0 && static_cast<std::uint64_t>(v) <= adapters::kMaxStallAfterMs / 1000) return "";
    return "must be between 0 (never) and " + std::to_string(adapters::kMaxStallAfterMs / 1000) + " (30 days)";
  });
  if (park_after_s > 0) c.park_after = std::chrono::seconds(park_after_s);
  r.read<std::string>("on_stall", c.on_stall, [](const std::string& v) -> std::string {
    return v == "warn" || v == "halt" ? "" : "must be \"warn\" or \"halt\"";
  });
  r.read<bool>("fsync_each_event", c.fsync_each_event);
  std::int64_t retention = c.request_id_retention.count();
  r.read<std::int64_t>("request_id_retention_s", retention,
                       [](const std::int64_t& v) { return v > 0 ? "" : "must be positive"; });
  c.request_id_retention = std::chrono::seconds(retention);
  r.read<std::size_t>("max_vendor_line_bytes", c.max_vendor_line_bytes,
                      [](const std::size_t& v) { return v >= 4096 ? "" : "must be at least 4096"; });
  r.read<std::size_t>("max_event_line_bytes", c.max_event_line_bytes, [](const std::size_t& v) -> std::string {
    if (v >= protocol::kMinEventLineBytes && v <= protocol::kMaxEventLineBytes) return "";
    return "must be between " + std::to_string(protocol::kMinEventLineBytes) + " and " +
           std::to_string(protocol::kMaxEventLineBytes) + " (the longest line every reader accepts)";
  });
  c.halt_grace = std::chrono::milliseconds(halt);
  c.exit_grace = std::chrono::milliseconds(exit_grace);
  c.shutdown_grace = std::chrono::milliseconds(shutdown);
  c.idle_timeout = std::chrono::milliseconds(idle);
}

// The run's body: cgroup, sandbox, user, the paths it may see, its default limits.
void read_run_body(TableReader& r, DaemonConfig& c) {
  r.read<std::string>("cgroup_root", c.cgroup_root, [](const std::string& v) -> std::string {
    return v.empty() || v == "none" || v.front() == '/' ? "" : "must be \"none\" or an absolute path";
  });
  r.read<std::string>("sandbox", c.sandbox, [](const std::string& v) -> std::string {
    return v == "auto" || v == "bwrap" || v == "none" ? "" : "must be \"auto\", \"bwrap\" or \"none\"";
  });
  r.read<std::string>("user", c.run_user);
  r.read_paths("workspace_roots", c.workspace_roots);
  r.read_paths("sandbox_read_only", c.sandbox_read_only);
  std::uint64_t memory_max = 0, pids_max = 0, cpu_max = 0;
  // The bounds a run spec's own limits have (adapters::limit_bounds): one rule for both.
  auto a_limit = [](std::string_view key) {
    return [bounds = *adapters::limit_bounds(key)](const std::uint64_t& v) {
      return bounds.holds(v) ? std::string() : "must be " + bounds.text();
    };
  };
  r.read<std::uint64_t>("memory_max_bytes", memory_max, a_limit("memory_max_bytes"));
  r.read<std::uint64_t>("pids_max", pids_max, a_limit("pids_max"));
  r.read<std::uint64_t>("cpu_max_percent", cpu_max, a_limit("cpu_max_percent"));
  if (memory_max) c.memory_max_bytes = memory_max;
  if (pids_max) c.pids_max = pids_max;
  if (cpu_max) c.cpu_max_percent = static_cast<std::uint32_t>(cpu_max);
}

// Supervision, what a stop does to the runs, and their network.
void read_run_supervision(TableReader& r, DaemonConfig& c) {
  r.read<bool>("supervise", c.supervise);
  std::string supervisor_binary = c.supervisor.string();
  r.read<std::string>("supervisor", supervisor_binary, [](const std::string& v) -> std::string {
    return v.empty() || v.front() == '/' ? "" : "must be an absolute path";
  });
  c.supervisor = supervisor_binary;
  std::int64_t adopt_within = c.adopt_within.count();
  r.read<std::int64_t>("adopt_within_ms", adopt_within, positive_ms);
  c.adopt_within = std::chrono::milliseconds(adopt_within);
  std::int64_t ungoverned_s = 0;
  r.read<std::int64_t>("ungoverned_halt_after_s", ungoverned_s,
                       [](const std::int64_t& v) { return v > 0 ? "" : "must be positive"; });
  if (ungoverned_s > 0) c.ungoverned_halt_after = std::chrono::seconds(ungoverned_s);
  r.read<std::string>("on_stop", c.on_stop, [](const std::string& v) -> std::string {
    return v == "halt" || v == "detach" ? "" : "must be \"halt\" or \"detach\"";
  });
  r.read<std::string>("network", c.network, [](const std::string& v) -> std::string {
    return v == "gateway" || v == "host" ? "" : "must be \"gateway\" or \"host\"";
  });
}

}  // namespace

std::string read_runs_table(const toml::table& runs, DaemonConfig& c) {
  std::string error;
  TableReader r(runs, "runs.", error);
  read_run_timings(r, c);
  read_run_body(r, c);
  read_run_supervision(r, c);
  if (error.empty() && c.ungoverned_halt_after && *c.ungoverned_halt_after >= c.adopt_within)
    error = "runs.ungoverned_halt_after_s (" + std::to_string(c.ungoverned_halt_after->count() / 1000) +
            " s) must be shorter than runs.adopt_within_ms (" + std::to_string(c.adopt_within.count()) +
            " ms), after which an unattached run is abandoned without its record closed";
  if (error.empty() && c.ungoverned_halt_after && !c.supervise)
    error = "runs.ungoverned_halt_after_s needs runs.supervise = true: an unsupervised run dies with its daemon";
  if (error.empty() && c.on_stop == "detach" && !c.supervise)
    error = "runs.on_stop = \"detach\" needs runs.supervise = true: a run that is the daemon's child dies with it";
  r.finish();
  return error;
}

}  // namespace mh::daemon::config_tables
