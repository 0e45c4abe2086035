#include "daemon/server/run_summary.hpp"

#include <ctime>

#include "daemon/run/run_dir.hpp"
#include "daemon/server/server.hpp"

namespace mh::daemon {

namespace asio = boost::asio;
namespace json = boost::json;

std::string rfc3339(std::chrono::system_clock::time_point t) {
  std::time_t s = std::chrono::system_clock::to_time_t(t);
  std::tm utc{};
  gmtime_r(&s, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

asio::awaitable<std::optional<RunStatus>> status_of(const std::shared_ptr<Run>& run) {
  if (!run) co_return std::nullopt;
  auto ask = [run](auto done) { run->status(done); };
  co_return co_await await_callback<RunStatus>(std::move(ask));
}

namespace {
json::object failure_json(const protocol::ev::RunFailure& f) {
  return json::object{{"category", f.category}, {"retryable", f.retryable}, {"detail", f.detail}};
}
}  // namespace

asio::awaitable<json::object> summary(const RunEntry& e) {
  json::object o;
  o["run_id"] = e.id;
  o["adapter"] = e.adapter;
  std::optional<RunStatus> status = co_await status_of(e.run);
  o["state"] = to_string(status ? status->phase : RunPhase::closed);
  o["created_at"] = rfc3339(e.created_at);
  o["age_ms"] =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now() - e.created_at).count();
  o["pending_decisions"] = status ? status->pending_decisions : 0;
  // Progress (issue 27 §2): a run waiting on a decision is not stalled, and says since when it
  // waits; a run's silence and a stall it was named for. Null when none (and for a closed run).
  {
    const auto now = std::chrono::system_clock::now();
    auto since = [&](const std::optional<std::uint64_t>& ago) -> json::value {
      if (!ago || !status || status->phase == RunPhase::closed) return nullptr;
      return json::value(rfc3339(now - std::chrono::milliseconds(*ago)));
    };
    std::optional<RunProgress> progress = status ? std::optional<RunProgress>(status->progress) : std::nullopt;
    o["waiting_on_decision_since"] = since(progress ? progress->waiting_ms : std::nullopt);
    o["last_output_at"] = since(progress ? progress->silent_ms : std::nullopt);
    o["stalled_since"] = since(progress ? progress->stalled_ms : std::nullopt);
  }
  if (status)
    o["turns"] = status->turns;
  else if (e.turns)
    o["turns"] = *e.turns;
  else
    o["turns"] = nullptr;
  o["last_seq"] = status ? status->last_seq : e.last_seq;
  if (status && status->close_reason)
    o["close_reason"] = protocol::to_string(*status->close_reason);
  else if (e.close_reason)
    o["close_reason"] = protocol::to_string(*e.close_reason);
  else
    o["close_reason"] = nullptr;
  // Why a closed run failed (stream.closed's failure); null while it runs and when it completed.
  o["failure"] = nullptr;
  if (e.failure) {
    o["failure"] = failure_json(*e.failure);
  } else if (status && status->close_reason && *status->close_reason != protocol::CloseReason::completed &&
             !e.dir.empty()) {
    // Closed a moment ago, before the registry heard: its record says.
    if (auto marker = RunRegistry::closed_marker(RunDir(e.dir).events()); marker && marker->failure)
      o["failure"] = failure_json(*marker->failure);
  }
  json::object labels;
  for (const auto& [k, v] : e.labels)
    labels[k] = v;
  o["labels"] = std::move(labels);
  o["owner_uid"] = e.owner_uid;
  // The vendor process while it runs; none after.
  if (status && status->pid > 0)
    o["pid"] = status->pid;
  else
    o["pid"] = nullptr;
  // Spend so far and the run's budgets; null for a run found on disk (not kept there).
  std::optional<Spend> spend = status ? std::optional<Spend>(status->spend) : e.spend;
  o["spend"] = spend ? json::value(spend->to_json()) : json::value(nullptr);
  std::optional<adapters::Budgets> budget = status ? std::optional<adapters::Budgets>(status->budget) : e.budget;
  o["budget"] = budget ? json::value(adapters::budgets_to_json(*budget)) : json::value(nullptr);
  // Its network and upstream (never a credential): null when not known here (a run found on disk;
  // `get` reads them from the run's files).
  o["network"] = e.network ? json::value(*e.network) : json::value(nullptr);
  o["upstream"] = e.upstream ? json::value(*e.upstream) : json::value(nullptr);
  co_return o;
}

}  // namespace mh::daemon
