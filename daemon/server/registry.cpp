#include "daemon/server/registry.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "daemon/log.hpp"
#include "daemon/process/run_containment.hpp"
#include "daemon/process/run_processes.hpp"
#include "daemon/run/run_dir.hpp"
#include "daemon/stream/event_log.hpp"
#include "daemon/supervisor/supervisor_link.hpp"
#include "protocol/reader.hpp"

namespace mh::daemon {

RunRegistry::RunRegistry(std::filesystem::path state_dir, std::size_t max_active_runs, adapters::Budgets daily)
    : state_dir_(std::move(state_dir)),
      max_active_(max_active_runs),
      daily_(daily),
      ledger_(state_dir_ / "daily-spend.json", std::move(daily)) {}

// --- start ------------------------------------------------------------------------------------

std::vector<std::string> RunRegistry::recover(const CgroupParent* cgroups, bool adoptable) {
  std::vector<std::string> to_adopt;
  std::error_code ec;
  auto root = RunDir::runs_of(state_dir_);
  make_directories(root, ec);  // runs/: 0750 whatever the umask
  for (const auto& dirent : std::filesystem::directory_iterator(root, ec)) {
    if (!dirent.is_directory()) continue;
    RunDir dir(dirent.path());
    if (!std::filesystem::exists(dir.events())) continue;
    RunEntry entry;
    entry.id = dirent.path().filename().string();
    entry.dir = dirent.path();
    entry.closed = true;
    if (auto closed = closed_marker(dir.events())) {
      entry.close_reason = closed->reason;
      entry.last_seq = closed->seq;
      entry.failure = closed->failure;
    } else if (adoptable && std::filesystem::exists(dirent.path() / "supervisor.json")) {
      entry.closed = false;
      to_adopt.push_back(entry.id);
    } else {
      recover_run(entry, dir.events(), cgroups, {});
    }
    runs_.emplace(entry.id, std::move(entry));
  }
  return to_adopt;
}

void RunRegistry::recover_cut_off(const std::string& id, const CgroupParent* cgroups, const std::string& why) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  it->second.closed = true;
  recover_run(it->second, RunDir(it->second.dir).events(), cgroups, why);
}

void RunRegistry::adopted(const std::string& id, RunRecord r) {
  auto created = runs_.count(id) ? runs_[id].created_at : std::chrono::system_clock::time_point{};
  record(id, std::move(r), created);
  RunEntry& e = runs_[id];
  e.closed = false;
  e.meta_loaded = false;
  load_meta(e);  // its owner, labels and creation time are the submit's
  ++active_;
}

std::optional<RunRegistry::ClosedMarker> RunRegistry::closed_marker(const std::filesystem::path& events) {
  int fd = ::open(events.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  ::fstat(fd, &st);
  std::size_t want = static_cast<std::size_t>(std::min<off_t>(st.st_size, 64 * 1024));
  std::string tail(want, '\0');
  ssize_t n = ::pread(fd, tail.data(), want, st.st_size - static_cast<off_t>(want));
  ::close(fd);
  if (n <= 0) return std::nullopt;
  tail.resize(static_cast<std::size_t>(n));
  if (tail.empty() || tail.back() != '\n') return std::nullopt;
  tail.pop_back();
  auto start = tail.rfind('\n');
  std::string_view last =
      start == std::string::npos ? std::string_view(tail) : std::string_view(tail).substr(start + 1);
  auto event = protocol::read_event_line(last);
  if (!event) return std::nullopt;
  auto* closed = std::get_if<protocol::ev::StreamClosed>(&event->payload);
  if (!closed) return std::nullopt;
  return ClosedMarker{closed->reason, event->seq, closed->failure};
}

void RunRegistry::recover_run(RunEntry& entry, const std::filesystem::path& events, const CgroupParent* cgroups,
                              const std::string& why) {
  auto recovered = EventLog::recover(events, entry.id);
  if (!recovered) {
    log(LogPriority::error, "run " + entry.id + ": cannot recover its stream: " + recovered.error());
    return;
  }
  if (recovered->report.already_closed) return;
  // A supervisor that still holds the run (it was not adopted) goes first: its vendor then has no
  // one to write to, and the rest of the run goes with its cgroup.
  bool supervisor_ended = end_stale_supervisor(entry.dir);
  std::size_t in_cgroup = 0;
  std::optional<protocol::ev::RunResources> resources;  // what the run's group counted, read before it goes
  if (cgroups) {
    if (auto group = cgroups->find(entry.id)) {
      in_cgroup = (*group)->processes().size();
      (void)(*group)->kill();
      (void)(*group)->wait_empty_sync(std::chrono::seconds(10));
      resources = run_resources((*group)->facts());
      (void)(*group)->remove();
    }
  }
  // The marker sweep reads every process on the host: only where the run had no group (every
  // process of a run with one was in it, and is gone with it).
  KillReport killed = resources ? KillReport{}
                                : kill_run_processes_sync(std::nullopt, RunMarker{"METAHARNESS_RUN", entry.id},
                                                          std::chrono::seconds(10));
  std::string message = "metaharness restarted after it was stopped without closing this run" +
                        (why.empty() ? "" : " (" + why + ")") + ": " + recovered->report.describe() + "; " +
                        std::to_string(killed.killed.size() + in_cgroup) + " leftover process(es) of the run killed" +
                        (supervisor_ended ? ", and its supervisor" : "");
  if (!killed.survivors.empty()) message += ", " + std::to_string(killed.survivors.size()) + " survived";
  (void)recovered->log.append(protocol::ev::Warning{"RECOVERED_AFTER_RESTART", message});
  auto closed = recovered->log.close(protocol::CloseReason::error, protocol::ProcessTermination{}, {}, resources);
  entry.close_reason = protocol::CloseReason::error;
  entry.last_seq = closed ? *closed : recovered->log.last_seq();
  if (auto marker = closed_marker(events)) entry.failure = marker->failure;
  log(LogPriority::warning, "run " + entry.id + ": " + message);
}

std::optional<std::string> RunRegistry::load_ledger(std::chrono::system_clock::time_point now) {
  return ledger_.load(utc_day(now));
}

// --- admission --------------------------------------------------------------------------------

boost::system::result<std::string, AdmissionRefusal> RunRegistry::admit(std::uint32_t uid,
                                                                        std::chrono::system_clock::time_point now,
                                                                        std::optional<std::string> given) {
  using Result = boost::system::result<std::string, AdmissionRefusal>;
  auto refuse = [](std::string code, std::string reason) {
    return Result(boost::system::in_place_error, AdmissionRefusal{std::move(code), std::move(reason)});
  };
  if (!accepting_) return refuse("SHUTTING_DOWN", "the daemon is stopping and accepts no new run");
  if (active_ >= max_active_)
    return refuse("BUSY", "the daemon is at runs.max_active (" + std::to_string(max_active_) + ") active runs");
  if (auto over = ledger_.refusal(uid, utc_day(now))) return refuse("BUDGET_EXHAUSTED", *over);
  if (given && runs_.count(*given)) return refuse("DUPLICATE_RUN", "run " + *given + " exists on this host already");
  std::string id = given.value_or(new_run_id());
  while (!given && runs_.count(id))  // 48 random bits: a repeat within one second is unlikely, never shared
    id = new_run_id();
  ++active_;  // reserved; released if the run cannot be created
  RunEntry placeholder;
  placeholder.id = id;
  runs_.emplace(id, std::move(placeholder));
  return Result(boost::system::in_place_value, std::move(id));
}

void RunRegistry::release(const std::string& id) {
  auto it = runs_.find(id);
  if (it == runs_.end() || it->second.closed) return;
  runs_.erase(it);
  --active_;
}

void RunRegistry::record(const std::string& id, RunRecord r, std::chrono::system_clock::time_point now) {
  RunEntry& e = runs_[id];
  e.id = id;
  e.dir = std::move(r.dir);
  e.run = std::move(r.run);
  e.stream = std::move(r.stream);
  e.meta_loaded = true;
  e.owner_uid = r.owner_uid;
  e.adapter = std::move(r.adapter);
  e.labels = std::move(r.labels);
  e.budget = std::move(r.budget);
  e.network = std::move(r.network);
  e.upstream = std::move(r.upstream);
  e.created_at = now;
}

void RunRegistry::seed_spend(const std::string& id, const Spend& spend) {
  if (auto it = runs_.find(id); it != runs_.end()) it->second.spend = spend;
}

// --- while runs run ---------------------------------------------------------------------------

SpendOutcome RunRegistry::spent(const std::string& id, std::uint32_t uid, const Spend& now,
                                std::chrono::system_clock::time_point at) {
  SpendOutcome out;
  auto it = runs_.find(id);
  if (it == runs_.end()) return out;
  Spend before = it->second.spend.value_or(Spend{});
  it->second.spend = now;
  if (!ledger_.metered()) return out;
  auto crossing = ledger_.add(uid, utc_day(at), before, now);
  if (!crossing) {
    out.save_soon = true;
    return out;
  }
  if (auto problem = ledger_.save()) log(LogPriority::error, "daily budgets: " + *problem);
  std::string message = crossing->message() + "; the daemon stops every run of uid " + std::to_string(uid) +
                        " and refuses new ones until the UTC day ends";
  log(LogPriority::warning, message);
  for (auto& [other_id, e] : runs_)
    if (e.run && !e.closed && e.owner_uid == uid) e.run->budget_exhausted(message);
  out.crossed = std::move(message);
  return out;
}

bool RunRegistry::closed(const std::string& id, const RunOutcome& outcome) {
  auto it = runs_.find(id);
  if (it == runs_.end() || it->second.closed) return false;
  RunEntry& e = it->second;
  e.closed = true;
  e.close_reason = outcome.reason;
  e.last_seq = outcome.events;
  e.turns = outcome.turns;
  // Why it failed is its record's (the event log judged it at the close): one read of the tail.
  if (outcome.reason != protocol::CloseReason::completed && !e.dir.empty())
    if (auto marker = closed_marker(RunDir(e.dir).events())) e.failure = marker->failure;
  if (outcome.spend) e.spend = outcome.spend;  // the last word: live spend reports may be off (server.cpp)
  e.run.reset();                               // its child, timers and buffers go; the stream stays readable
  --active_;
  log(LogPriority::info, "run " + id + " closed: " + std::string(protocol::to_string(outcome.reason)));
  return true;
}

// --- views ------------------------------------------------------------------------------------

void RunRegistry::load_meta(RunEntry& e) {
  if (e.meta_loaded || e.dir.empty()) return;
  e.meta_loaded = true;
  auto meta = RunDir(e.dir).read_meta();
  if (!meta) return;
  e.adapter = meta->adapter;
  e.owner_uid = meta->owner_uid;
  e.created_at = std::chrono::system_clock::time_point(std::chrono::seconds(meta->created_unix));
  e.labels = meta->labels;
}

std::optional<RunEntry> RunRegistry::lookup(const std::string& id) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return std::nullopt;
  load_meta(it->second);
  return it->second;
}

std::vector<RunEntry> RunRegistry::snapshot() {
  std::vector<RunEntry> out;
  for (auto& [id, e] : runs_) {
    if (e.dir.empty()) continue;  // admitted, not created yet
    load_meta(e);
    out.push_back(e);
  }
  return out;
}

RegistryCounts RunRegistry::counts() const {
  RegistryCounts c;
  for (const auto& [id, e] : runs_) {
    if (e.closed || (e.stream && e.stream->final_seq())) continue;
    if (e.run)
      c.open.push_back(e.run);
    else
      ++c.starting;
  }
  c.total = runs_.size();
  c.accepting = accepting_;
  return c;
}

std::vector<RunRegistry::OwnerSpend> RunRegistry::spend_today(std::chrono::system_clock::time_point now) {
  std::vector<OwnerSpend> out;
  if (!ledger_.metered()) return out;
  std::set<std::uint32_t> owners;
  for (auto& [id, e] : runs_) {
    load_meta(e);
    if (!e.dir.empty()) owners.insert(e.owner_uid);
  }
  const std::int64_t day = utc_day(now);
  // The ledger's own list first: every owner it holds figures or reservations for today (an owner
  // whose run directories are gone included), then owners of known runs with nothing held.
  for (const OwnerDay& o : ledger_.owners(day)) {
    out.push_back({o.uid, o.spent, o.reserved_usd, o.reservations});
    owners.erase(o.uid);
  }
  for (std::uint32_t uid : owners) {
    DaySpend spent = ledger_.today(uid, day);
    if (spent.input_tokens || spent.output_tokens || !spent.usd || *spent.usd > 0) out.push_back({uid, spent});
  }
  return out;
}

std::string RunRegistry::status_text() const {
  return "STATUS=" + std::to_string(active_) + " active run(s), " + std::to_string(runs_.size() - active_) + " closed" +
         (accepting_ ? "" : "; stopping");
}

// --- stopping ---------------------------------------------------------------------------------

std::vector<std::shared_ptr<Run>> RunRegistry::stop_accepting() {
  accepting_ = false;
  std::vector<std::shared_ptr<Run>> open;
  for (auto& [id, e] : runs_)
    if (e.run && !e.closed) open.push_back(e.run);
  return open;
}

std::optional<std::string> RunRegistry::save_ledger() {
  if (!ledger_.metered()) return std::nullopt;
  return ledger_.save();
}

}  // namespace mh::daemon
