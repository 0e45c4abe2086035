// The daemon's runs, by id: admission (runs.max_active, whether the daemon still accepts, the
// owners' daily budgets), what runs, what closed, and what the state directory held at start.
//
// Not thread-safe, by design: it lives on the registry's strand (Server::on_registry posts
// there), as one writer with no locks. It reads run.json files and the streams' tails, recovers
// streams a killed daemon left open, and spawns nothing.
#pragma once

#include <boost/system/result.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/process/run_cgroup.hpp"
#include "daemon/run/run.hpp"
#include "daemon/server/daily_spend.hpp"

namespace mh::daemon {

class SharedStreamState;

struct RunEntry {
  std::string id;
  std::filesystem::path dir;                  // empty while admitted but not yet created
  std::shared_ptr<Run> run;                   // while it runs
  std::shared_ptr<SharedStreamState> stream;  // for readers, while known in this process
  bool closed = false;
  std::optional<protocol::CloseReason> close_reason;
  // Why it failed, as its stream.closed says (issue 27): read from the record once it is closed;
  // nullopt for a run that completed (or whose record predates the field).
  std::optional<protocol::ev::RunFailure> failure;
  bool meta_loaded = false;
  std::uint32_t owner_uid = 0;
  std::string adapter;
  std::map<std::string, std::string> labels;
  std::chrono::system_clock::time_point created_at{};
  std::uint64_t last_seq = 0;
  // Known for a run that closed in this process; a run found on disk at start has no count
  // (null in a summary, not 0: absence of evidence is not a property).
  std::optional<std::uint32_t> turns;
  // What the run has spent (last reported) and its limits; unknown for a run found on disk.
  std::optional<Spend> spend;
  std::optional<adapters::Budgets> budget;
  // The run's network ("gateway" | "host") and its upstream's name (docs/gateway.md): known for a
  // run submitted to this process; nullopt for one found on disk or adopted (its get reads them
  // from its files).
  std::optional<std::string> network;
  std::optional<std::string> upstream;
};

// Why a submit is not admitted: the socket refusal code and its reason.
struct AdmissionRefusal {
  std::string code;  // SHUTTING_DOWN, BUSY, BUDGET_EXHAUSTED
  std::string reason;
};

// What the registry learns about a run once Run::create has made it.
struct RunRecord {
  std::filesystem::path dir;
  std::shared_ptr<Run> run;
  std::shared_ptr<SharedStreamState> stream;
  std::uint32_t owner_uid = 0;
  std::string adapter;
  std::map<std::string, std::string> labels;
  adapters::Budgets budget;
  std::optional<std::string> network;   // "gateway" | "host"
  std::optional<std::string> upstream;  // the configured upstream's name, if the run has one
};

// The runs as `status` counts them: one view with the streams (a run whose stream holds
// stream.closed is not open, even before the registry hears it closed).
struct RegistryCounts {
  std::vector<std::shared_ptr<Run>> open;  // to ask for their phase
  std::size_t starting = 0;                // admitted, being created
  std::size_t total = 0;                   // every run known, on disk included
  bool accepting = true;
};

// What a run's new spend did to its owner's day.
struct SpendOutcome {
  bool save_soon = false;              // the ledger moved: write it soon
  std::optional<std::string> crossed;  // a daily budget was crossed: why the owner's runs stop
};

class RunRegistry {
 public:
  RunRegistry(std::filesystem::path state_dir, std::size_t max_active_runs, adapters::Budgets daily);

  // --- start --------------------------------------------------------------------------------
  // Every run directory under <state_dir>/runs that holds a stream. A stream that lacks
  // stream.closed was cut off by a crash of a previous daemon: its torn last line is cut, what is
  // left of its processes is killed (its cgroup, when `cgroups` holds one of that name, and
  // anything still carrying its marker), and it is closed with a warning naming the recovery. A
  // closed run costs one read of its file's tail.
  //
  // With `adoptable`, an open run whose body is held by a supervisor (supervisor.json beside its
  // stream) is neither killed nor closed: its id is returned, for the daemon to adopt (adopted())
  // or, failing that, to recover as cut off (recover_cut_off()).
  std::vector<std::string> recover(const CgroupParent* cgroups = nullptr, bool adoptable = false);
  // A run a previous daemon left open: killed (its cgroup, its marker) and closed, saying why.
  void recover_cut_off(const std::string& id, const CgroupParent* cgroups, const std::string& why = {});
  // A run a previous daemon started, taken over by this one: active until it closes.
  void adopted(const std::string& id, RunRecord record);
  // What an adopted run had spent before (metered by the previous daemon): the next spend report
  // meters only what comes after it.
  void seed_spend(const std::string& id, const Spend& spend);
  // Today's spend per owner (nullopt, or a problem to log: the day then starts from zero).
  std::optional<std::string> load_ledger(std::chrono::system_clock::time_point now);

  // --- admission ----------------------------------------------------------------------------
  // A new run of `uid`: refused by name, or admitted under a fresh id (daemon::new_run_id) that
  // is reserved and counted active until record() or release().
  // `id`: the id a fleet submitter assigned (refused when this daemon knows it already).
  boost::system::result<std::string, AdmissionRefusal> admit(std::uint32_t uid,
                                                             std::chrono::system_clock::time_point now,
                                                             std::optional<std::string> id = std::nullopt);
  // The admitted run could not be created: it leaves no trace, and no reservation.
  void release(const std::string& id);
  void record(const std::string& id, RunRecord record, std::chrono::system_clock::time_point now);

  // --- while runs run -----------------------------------------------------------------------
  // A run's spend moved: the owner's day is metered. When that crossed a daily budget the
  // ledger is saved at once (a daemon killed right after must still refuse) and every open run
  // of the owner is stopped, saying which budget.
  SpendOutcome spent(const std::string& id, std::uint32_t uid, const Spend& now,
                     std::chrono::system_clock::time_point at);
  // Whether any daily budget is configured (fixed at construction: any thread). Without one a
  // live run's spend is read from the run itself, and the registry learns it at the close.
  bool meters_spend() const { return ledger_.metered(); }
  // The daily ledger itself: its reservations are taken from any run's strand (it locks its own
  // state), so a gateway's request reserves without a hop to the registry's strand (issue 25).
  DailySpendLedger& ledger() { return ledger_; }
  // A run's stream closed: its process, timers and buffers go; its stream stays readable.
  // False for a run it does not know, or that had closed already.
  bool closed(const std::string& id, const RunOutcome& outcome);

  // --- views --------------------------------------------------------------------------------
  // One run, with its run.json read (nullopt: unknown).
  std::optional<RunEntry> lookup(const std::string& id);
  // Every run that has a directory, in id order (ids begin with their UTC time), with run.json read.
  std::vector<RunEntry> snapshot();
  RegistryCounts counts() const;
  // Today's spend (UTC) of every owner the ledger may hold figures for — each owner of a run this
  // registry knows (a run of a previous daemon's day is on disk, so its owner is known) — with
  // anything spent today. Empty when no daily budget meters spend (meters_spend()).
  struct OwnerSpend {
    std::uint32_t uid = 0;
    DaySpend spent;
    double reserved_usd = 0;       // held by requests in flight (and settled, not yet reported)
    std::size_t reservations = 0;  // requests in flight holding a reservation
  };
  std::vector<OwnerSpend> spend_today(std::chrono::system_clock::time_point now);
  const adapters::Budgets& daily_budget() const { return daily_; }
  // The sd_notify STATUS= line.
  std::string status_text() const;
  std::size_t active() const { return active_; }
  std::size_t size() const { return runs_.size(); }
  bool accepting() const { return accepting_; }

  // --- stopping -----------------------------------------------------------------------------
  // No run is admitted from now on. Returns the runs still open, for the caller to stop.
  std::vector<std::shared_ptr<Run>> stop_accepting();
  // Writes the daily figures now (at shutdown; nullopt, or the problem). Nothing when unmetered.
  std::optional<std::string> save_ledger();

  // The last line of a stream, when it is stream.closed: its reason, seq and failure. Reads only
  // the tail.
  struct ClosedMarker {
    protocol::CloseReason reason;
    std::uint64_t seq = 0;
    std::optional<protocol::ev::RunFailure> failure;
  };
  static std::optional<ClosedMarker> closed_marker(const std::filesystem::path& events);

 private:
  void load_meta(RunEntry& e);
  void recover_run(RunEntry& entry, const std::filesystem::path& events, const CgroupParent* cgroups,
                   const std::string& why);

  std::filesystem::path state_dir_;
  std::size_t max_active_;
  adapters::Budgets daily_;
  DailySpendLedger ledger_;
  std::map<std::string, RunEntry> runs_;
  std::size_t active_ = 0;
  bool accepting_ = true;
};

}  // namespace mh::daemon
