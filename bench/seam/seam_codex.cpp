// The Codex row of the call seam bench (seam/seam.hpp): the real `codex app-server` (the
// pinned native binary) driven directly over JSON-RPC stdio, one turn of N sequential
// exec_command calls (`touch f<i>`), three variants:
//
//   never_ask        thread/start with approvalPolicy "never": Codex asks nobody. The floor.
//   bare_driver      the same, approvalPolicy "untrusted" (what metaharness uses): Codex sends an
//                    item/commandExecution/requestApproval for every call and the bench answers
//                    {"decision":"accept"} at once. The approval round trip inside Codex itself.
//   metaharness_ask  `metaharness run codex --decisions ask` (shared: seam_bench.cpp). On top of
//                    the bare driver: metaharness's PreToolUse hook (mh-codex-hook, one process
//                    per call) and metaharness's own path.
//
// The direct variants get the same CODEX_HOME/config.toml shape the codex adapter writes (model
// provider = the scripted endpoint, wire_api responses, env_key token, web search off, no TTY
// sessions, the project pinned untrusted) without its hooks section, and the same JSON-RPC
// messages (initialize with the same opt-outs, thread/start with cwd, sandbox workspace-write and
// bypass_hook_trust, turn/start with the prompt); only the approval policy differs between them.
//
// No goal is judged: the report gives the added time per call (unpaired and paired by round,
// with 95% bootstrap intervals), metaharness's in-process share from the raw samples of its
// --latency-report files, and its hook's from Codex's hook/completed.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "adapters/vendor_binaries.hpp"
#include "bench/seam/seam.hpp"
#include "daemon/model/scripted_endpoint.hpp"
#include "metaharness/build_info.hpp"

namespace mh::seam {
namespace {

using namespace std::chrono_literals;

// What the codex adapter asks Codex not to send (adapters/codex/codex_adapter.cpp, kOptOut): the
// direct variants ask the same, so Codex does the same notification work in every variant.
constexpr std::array<std::string_view, 9> kOptOut = {
    "item/agentMessage/delta",  "item/reasoning/summaryTextDelta",   "item/reasoning/summaryPartAdded",
    "item/reasoning/textDelta", "item/commandExecution/outputDelta", "item/fileChange/outputDelta",
    "item/plan/delta",          "item/mcpToolCall/progress",         "thread/status/changed"};

// The environment variable holding the endpoint's token: the adapter's name for it.
constexpr std::string_view kTokenEnv = "METAHARNESS_MODEL_TOKEN";

// The three paths metaharness's --latency-report times; see cli/run_verb.cpp.
constexpr std::array<std::string_view, 3> kOwnShares = {"line_to_requested", "decide_to_answer", "line_to_answer"};

const json::object* object_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_object() ? &v->get_object() : nullptr;
}

std::optional<std::string> string_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v && v->is_string()) return std::string(v->get_string());
  return std::nullopt;
}

// The config.toml the codex adapter writes (adapters/codex/codex_adapter.cpp, plan()), minus
// its [[hooks.PreToolUse]] section: the direct variants run no hook.
std::string config_toml(const RunContext& c, const std::string& base_url, const fs::path& work) {
  std::ostringstream toml;
  toml << "# Written by mh_codex_seam_bench: the codex adapter's config.toml without its hooks.\n"
       << "model = \"" << c.o.model << "\"\n"
       << "model_provider = \"metaharness\"\n"
       << "web_search = \"disabled\"\n\n"
       << "[features]\n"
       << "unified_exec_tty = false\n\n"
       << "[model_providers.metaharness]\n"
       << "name = \"metaharness model endpoint\"\n"
       << "base_url = \"" << base_url << "/v1\"\n"
       << "wire_api = \"responses\"\n"
       << "env_key = \"" << kTokenEnv << "\"\n\n"
       << "[projects." << json::serialize(json::value(work.string())) << "]\n"
       << "trust_level = \"untrusted\"\n";
  return toml.str();
}

// LANG, LC_ALL and TZ pass through to codex in the adapter's plan; the same here and for
// metaharness, so every variant's codex sees the same locale.
void pass_locale(std::vector<std::string>& env) {
  for (const char* name : {"LANG", "LC_ALL", "TZ"})
    if (const char* v = std::getenv(name)) env.push_back(std::string(name) + "=" + v);
}

void run_codex_directly(const RunContext& c, RunRecord& r) {
  const fs::path home = r.dir / "home", codex_home = r.dir / "codex-home", tmp = r.dir / "tmp", work = r.dir / "work";
  for (const auto& d : {home, codex_home, tmp, work})
    fs::create_directories(d);

  auto endpoint = c.start_endpoint(r);
  if (!endpoint) return;
  std::ofstream(codex_home / "config.toml") << config_toml(c, endpoint->base_url(), work);
  fs::permissions(codex_home / "config.toml", fs::perms::owner_read | fs::perms::owner_write);

  std::vector<std::string> env;
  pass_locale(env);
  env.insert(env.end(),
             {"HOME=" + home.string(), "CODEX_HOME=" + codex_home.string(), "PATH=/usr/local/bin:/usr/bin:/bin",
              "TMPDIR=" + tmp.string(), std::string(kTokenEnv) + "=" + endpoint->token()});

  // The adapter's messages, in its order: initialize; on its answer initialized and
  // thread/start; on that answer turn/start with the prompt.
  json::array opt_out;
  for (auto m : kOptOut)
    opt_out.emplace_back(m);
  const std::string initialize = json::serialize(json::object{
      {"id", 1},
      {"method", "initialize"},
      {"params",
       json::object{{"capabilities", json::object{{"experimentalApi", true}, {"optOutNotificationMethods", opt_out}}},
                    {"clientInfo", json::object{{"name", "mh_codex_seam_bench"},
                                                {"title", "mh_codex_seam_bench"},
                                                {"version", std::string(mh::build_info::version)}}}}}});
  const bool never = r.variant == Variant::floor;
  const std::string thread_start =
      json::serialize(json::object{{"id", 2},
                                   {"method", "thread/start"},
                                   {"params", json::object{{"approvalPolicy", never ? "never" : "untrusted"},
                                                           {"config", json::object{{"bypass_hook_trust", true}}},
                                                           {"cwd", work.string()},
                                                           {"sandbox", "workspace-write"}}}});

  Subprocess child;
  child.track_in(&g_running_child);
  const Clock::time_point started = Clock::now();
  const Clock::time_point deadline = c.deadline_from(started);
  if (auto error = child.spawn({.program = c.o.vendor_bin,
                                .args = std::vector<std::string>{"app-server"},
                                .env = env,
                                .cwd = work,
                                .stderr_file = r.dir / "stderr.txt"});
      !error.empty()) {
    r.failure = error;
    endpoint->stop();
    return;
  }
  LineReader reader(child.stdout_fd(), &g_stop_requested);
  child.write_line(initialize);

  std::string line;
  Clock::time_point read_at;
  std::optional<Clock::time_point> turn_done_at;
  std::string problem;  // the run went on, but does not count
  // --keep: codex's stdout as the driver read it, written out after the run so that keeping it
  // costs the measured turn nothing (metaharness keeps its own, vendor-stdout.jsonl).
  std::vector<std::string> transcript;
  while (!turn_done_at && r.failure.empty()) {
    auto object = next_object(reader, line, read_at, deadline, "turn/completed", r, c.o.keep ? &transcript : nullptr);
    if (!object) break;
    const json::object& m = *object;
    const json::value* id = m.if_contains("id");
    auto method = string_at(m, "method");
    static const json::object kEmpty;
    const json::object* params_ptr = object_at(m, "params");
    const json::object& params = params_ptr ? *params_ptr : kEmpty;
    if (!method && id) {  // an answer to one of ours
      if (const json::object* error = object_at(m, "error")) {
        r.failure = "codex refused request " + json::serialize(*id) + ": " + json::serialize(*error).substr(0, 300);
        break;
      }
      const json::object* result = object_at(m, "result");
      if (*id == 1) {
        child.write_line(R"({"method":"initialized"})");
        child.write_line(thread_start);
      } else if (*id == 2) {
        const json::object* thread = result ? object_at(*result, "thread") : nullptr;
        auto thread_id = thread ? string_at(*thread, "id") : std::nullopt;
        if (!thread_id) {
          r.failure = "thread/start answered without a thread id";
          break;
        }
        if (auto policy = result ? string_at(*result, "approvalPolicy") : std::nullopt;
            policy != std::string(never ? "never" : "untrusted"))
          problem = "thread/start answered approvalPolicy " + policy.value_or("(none)");
        json::object turn{
            {"id", 3},
            {"method", "turn/start"},
            {"params", json::object{{"input", json::array{json::object{{"text", c.o.prompt}, {"type", "text"}}}},
                                    {"threadId", *thread_id}}}};
        child.write_line(json::serialize(turn));
      }
    } else if (method && id) {  // a request of Codex's
      if (*method == "item/commandExecution/requestApproval" && !never) {
        // Never acceptForSession: like metaharness, every call is decided on its own.
        std::string answer = R"({"id":)" + json::serialize(*id) + R"(,"result":{"decision":"accept"}})";
        child.write_line(answer);
        r.driver_reaction_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - read_at).count());
        ++r.calls_answered;
      } else {
        // Nothing else is expected (an approval under never would mean the floor is not one):
        // answer so Codex does not wait, and do not count the run.
        child.write_line(R"({"id":)" + json::serialize(*id) +
                         R"(,"error":{"code":-32000,"message":"mh_codex_seam_bench does not serve this"}})");
        if (problem.empty()) problem = "codex sent an unexpected " + *method;
      }
    } else if (method) {  // a notification
      if (*method == "item/started" || *method == "item/completed") {
        const json::object* item = object_at(params, "item");
        if (!item || string_at(*item, "type") != "commandExecution") continue;
        std::string call = string_at(*item, "id").value_or("");
        if (*method == "item/started") {
          r.call_seen_ms.push_back(ms_between(started, read_at));
          r.seen_by_id.emplace(call, ms_between(started, read_at));
        } else {
          r.done_by_id[call] = ms_between(started, read_at);
          if (auto s = string_at(*item, "status"); s != "completed" && problem.empty())
            problem = "call " + call + " ended " + s.value_or("(no status)");
        }
      } else if (*method == "turn/completed") {
        turn_done_at = read_at;
        const json::object* turn = object_at(params, "turn");
        if (auto s = turn ? string_at(*turn, "status") : std::nullopt; s != "completed" && problem.empty())
          problem = "the turn ended " + s.value_or("(no status)") + ": " + line.substr(0, 300);
      }
    }
  }
  std::optional<Clock::time_point> eof_at;
  std::optional<int> exit_status;
  if (r.failure.empty()) {
    child.close_stdin();  // the turn is over: app-server exits on stdin EOF
    eof_at = reader.drain(deadline);
    if (!eof_at)
      r.failure = "codex did not close its stdout after stdin closed";
    else if (!(exit_status = child.wait_exit(*eof_at + 10s)))
      r.failure = "codex did not exit";
  }
  child.terminate(5s);
  r.child_cpu_ms = child.cpu_ms();
  endpoint->stop();
  if (c.o.keep) {
    std::ofstream out(r.dir / "codex-stdout.jsonl");
    for (const auto& l : transcript)
      out << l << "\n";
  }
  if (!r.failure.empty()) return;
  if (!WIFEXITED(*exit_status) || WEXITSTATUS(*exit_status) != 0)
    r.failure = "codex exit status " + std::to_string(WIFEXITED(*exit_status) ? WEXITSTATUS(*exit_status) : -1);
  if (r.failure.empty()) r.failure = problem;
  if (!r.failure.empty()) return;

  r.wall_turn_ms = ms_between(started, *turn_done_at);
  r.wall_end_ms = ms_between(started, *eof_at);
  std::vector<RunContext::Served> served;
  for (const auto& request : endpoint->requests())
    served.push_back(
        {std::string(mh::model::to_string(request.answer)), static_cast<double>(request.received_at.count())});
  r.failure = c.check_requests(served, r);
  if (r.failure.empty() && !never && r.calls_answered != c.calls)
    r.failure = "answered " + std::to_string(r.calls_answered) + " approvals, not " + std::to_string(c.calls);
  if (r.failure.empty()) r.failure = c.check_files(work);
  r.ok = r.failure.empty();
}

void read_hook_durations(const fs::path& run_dir, RunRecord& r) {
  const fs::path transcript = run_dir / "vendor-stdout.jsonl";
  std::ifstream in(transcript);
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"hook/completed\"") == std::string::npos) continue;
    boost::system::error_code ec;
    json::value v = json::parse(line, ec);
    if (ec || !v.is_object()) continue;
    const json::object* params = object_at(v.get_object(), "params");
    const json::object* run = params ? object_at(*params, "run") : nullptr;
    if (!run || string_at(*run, "eventName") != "preToolUse") continue;
    if (const json::value* d = run->if_contains("durationMs"); d && d->is_number())
      r.hook_ms.push_back(d->to_number<double>());
  }
}

std::string read_latency_report(const json::object& report, RunRecord& r) {
  for (auto name : kOwnShares) {
    const json::object* section = object_at(report, name);
    if (!section) return "the latency report lacks " + std::string(name);
    auto& samples = r.own_share_us[std::string(name)];
    if (const json::value* raw = section->if_contains("samples_us"); raw && raw->is_array())
      for (const auto& s : raw->get_array())
        if (s.is_number()) samples.push_back(s.to_number<double>());
  }
  return "";
}

constexpr std::array<Metric, 6> kMetrics = [] {
  constexpr auto shared = shared_metrics("wall_turn_ms", "spawn -> turn end");
  // What the seam costs in CPU (the process tree plus the bench's driver and endpoint): on a
  // shared 2-core machine wall time moves with everyone else's load, CPU time far less.
  return std::array<Metric, 6>{shared[0], shared[1],
                               shared[2], shared[3],
                               shared[4], Metric{"cpu_ms", "CPU of the run", true, &median_of<&RunRecord::cpu_ms>}};
}();

int report(const Options& o, int calls, const std::vector<RunRecord>& records) {
  Outcome out(records);
  auto& ok = out.ok;
  auto has = [&](Variant v) { return std::find(o.variants.begin(), o.variants.end(), v) != o.variants.end(); };

  json::object summary = summary_head(o, calls);
  summary["model"] = o.model;
  summary["hardware_concurrency"] = std::thread::hardware_concurrency();
  VariantTable table{.seam_title = "Codex approval seam",
                     .call_kind = "exec_command",
                     .turn_key = "wall_turn_ms",
                     .turn_title = "spawn -> turn end",
                     .latency_span = "call announced -> its result",
                     .counts_aux_requests = true,
                     .entry_extras = {},
                     .run_extras = {}};
  summary["variants"] = variant_table(o, calls, out, records, table);

  print_cpu_table(o, out);

  // Added time per call, each comparison with its 95% bootstrap interval: the two seams against
  // the floor, and metaharness against the bare driver (metaharness's own share: its hook
  // process per call and its own path, on top of the approval round trip).
  //
  // Two estimates of each. "unpaired" is the issue's definition: (median of the variant's runs -
  // median of the other's) / N, runs resampled per variant for the interval. "paired" uses the
  // interleaving: the two runs of one round ran seconds apart, under nearly the same load from
  // the rest of the machine, so the median over rounds of the within-round difference (rounds
  // resampled for the interval) is far less moved by load that drifts over minutes.
  //
  // Call latency is not compared with never_ask: under "never" Codex announces a command
  // (item/started) only once it has run, under "untrusted" before it asks for the approval, so
  // the two latencies time different things. Between bare_driver and metaharness_ask it is
  // compared: both end at the result; metaharness's begins at its first tool.requested, which
  // comes from its PreToolUse hook, a few ms before Codex's item/started.
  struct Comparison {
    Variant variant, against;
    std::string_view key;
  };
  const std::array<Comparison, 3> comparisons = {
      Comparison{Variant::bare_driver, Variant::floor, "bare_driver_vs_never_ask"},
      Comparison{Variant::metaharness_ask, Variant::floor, "metaharness_ask_vs_never_ask"},
      Comparison{Variant::metaharness_ask, Variant::bare_driver, "metaharness_ask_vs_bare_driver"}};
  auto comparable = [](const Comparison& c, const Metric& m) {
    return m.key != "call_latency_ms" || c.against != Variant::floor;
  };
  // The runs of one variant by round, for pairing.
  auto by_round = [&](Variant v) {
    std::map<int, const RunRecord*> rounds;
    for (const RunRecord* r : ok[v])
      rounds[r->round] = r;
    return rounds;
  };
  json::object added;
  for (bool paired : {false, true}) {
    if (!paired)
      std::cout << "\nadded ms per call, unpaired: (median(variant) - median(other)) / " << calls
                << " for per-turn figures, difference of the medians for per-call ones; [95% bootstrap interval]\n";
    else
      std::cout << "\nadded ms per call, paired by round: median over rounds of (variant - other in the same round), / "
                << calls << " for per-turn figures; [95% bootstrap interval over rounds]\n";
    std::printf("%-32s %-22s %-22s %-22s %-22s %-22s %-22s\n", "comparison", "spawn -> turn end",
                "spawn -> end of stream", "model request 1->N+1", "median call cycle", "median call latency",
                "CPU of the run");
    for (const auto& c : comparisons) {
      if (!has(c.variant) || !has(c.against)) continue;
      json::object& figures = added[c.key].is_object() ? added[c.key].get_object() : added[c.key].emplace_object();
      std::vector<std::string> cells;
      // Rounds in which both variants completed, as one-run groups for the paired figures.
      std::vector<std::pair<const RunRecord*, const RunRecord*>> pairs;
      auto a_rounds = by_round(c.variant), b_rounds = by_round(c.against);
      for (const auto& [round, a] : a_rounds)
        if (auto b = b_rounds.find(round); b != b_rounds.end()) pairs.emplace_back(a, b->second);
      for (const auto& m : kMetrics) {
        const Runs &a = ok[c.variant], &b = ok[c.against];
        if (!comparable(c, m)) {
          cells.push_back("n/c");
          continue;
        }
        const double divisor = m.per_turn ? calls : 1;
        std::optional<double> point;
        std::optional<std::pair<double, double>> interval;
        if (!paired && !a.empty() && !b.empty()) {
          point = (m.statistic(a) - m.statistic(b)) / divisor;
          interval = bootstrap_interval(std::vector<Runs>{a, b}, [&](const std::vector<Runs>& g) {
            return std::optional<double>((m.statistic(g[0]) - m.statistic(g[1])) / divisor);
          });
        } else if (paired && !pairs.empty()) {
          // Each round's difference, with the metric taken over that round's one run.
          std::vector<double> differences;
          for (const auto& [x, y] : pairs)
            differences.push_back((m.statistic(Runs{x}) - m.statistic(Runs{y})) / divisor);
          point = median(differences);
          if (differences.size() >= 2) {
            std::mt19937_64 random(20261129);
            std::uniform_int_distribution<std::size_t> pick(0, differences.size() - 1);
            std::vector<double> estimates;
            for (int i = 0; i < 2000; ++i) {
              std::vector<double> resampled;
              for (std::size_t k = 0; k < differences.size(); ++k)
                resampled.push_back(differences[pick(random)]);
              estimates.push_back(median(std::move(resampled)));
            }
            std::sort(estimates.begin(), estimates.end());
            interval = std::make_pair(quantile_of_sorted(estimates, 0.025), quantile_of_sorted(estimates, 0.975));
          }
        }
        if (!point) {
          cells.push_back("n/a");
          continue;
        }
        json::object f{{"ms_per_call", *point}};
        std::string cell = fixed(*point, 2);
        if (interval) {
          f["ms_per_call_95"] = json::array{interval->first, interval->second};
          cell += " [" + fixed(interval->first, 2) + ", " + fixed(interval->second, 2) + "]";
        }
        if (paired) f["rounds"] = pairs.size();
        json::object& metric =
            figures[m.key].is_object() ? figures[m.key].get_object() : figures[m.key].emplace_object();
        metric[paired ? "paired" : "unpaired"] = std::move(f);
        cells.push_back(cell);
      }
      std::string title = std::string(name_of(c.variant)) + " - " + std::string(name_of(c.against));
      std::printf("%-32s %-22s %-22s %-22s %-22s %-22s %-22s\n", title.c_str(), cells[0].c_str(), cells[1].c_str(),
                  cells[2].c_str(), cells[3].c_str(), cells[4].c_str(), cells[5].c_str());
    }
  }
  summary["added_per_call"] = std::move(added);

  // metaharness's in-process share, pooled exactly from the raw samples of every run's
  // --latency-report.
  if (has(Variant::metaharness_ask)) {
    std::cout << "\nmetaharness's own share in-process (--latency-report, raw samples of every run pooled), us\n";
    std::printf("%-20s %8s %10s %10s %10s %10s\n", "path", "samples", "p50", "p90", "p99", "max");
    json::object own;
    for (auto name : kOwnShares) {
      std::vector<double> pooled;
      for (const RunRecord* r : ok[Variant::metaharness_ask])
        if (auto it = r->own_share_us.find(std::string(name)); it != r->own_share_us.end())
          pooled.insert(pooled.end(), it->second.begin(), it->second.end());
      std::sort(pooled.begin(), pooled.end());
      json::object s{{"samples", pooled.size()}};
      if (!pooled.empty()) {
        s["p50_us"] = quantile_of_sorted(pooled, 0.50);
        s["p90_us"] = quantile_of_sorted(pooled, 0.90);
        s["p99_us"] = quantile_of_sorted(pooled, 0.99);
        s["max_us"] = pooled.back();
      }
      std::printf("%-20s %8zu %10.1f %10.1f %10.1f %10.1f\n", std::string(name).c_str(), pooled.size(),
                  quantile_of_sorted(pooled, 0.50), quantile_of_sorted(pooled, 0.90), quantile_of_sorted(pooled, 0.99),
                  pooled.empty() ? 0.0 : pooled.back());
      own[name] = std::move(s);
    }
    summary["own_share"] = std::move(own);

    std::vector<double> hooks;
    for (const RunRecord* r : ok[Variant::metaharness_ask])
      hooks.insert(hooks.end(), r->hook_ms.begin(), r->hook_ms.end());
    std::sort(hooks.begin(), hooks.end());
    std::printf(
        "\nPreToolUse hook run (mh-codex-hook) as Codex timed it (hook/completed durationMs), ms: %zu runs, "
        "median %.1f [p10 %.1f .. p90 %.1f], max %.1f\n",
        hooks.size(), median(hooks), quantile_of_sorted(hooks, 0.10), quantile_of_sorted(hooks, 0.90),
        hooks.empty() ? 0.0 : hooks.back());
    summary["hook_run_ms"] = json::object{{"median", median(hooks)},
                                          {"p10", quantile_of_sorted(hooks, 0.10)},
                                          {"p90", quantile_of_sorted(hooks, 0.90)},
                                          {"max", hooks.empty() ? 0.0 : hooks.back()},
                                          {"n", hooks.size()}};
  }

  // One machine-readable line per comparison on the issue's metric, for scripts/bench.sh.
  std::cout << "\n";
  for (const auto& c : comparisons) {
    const json::value* figures = summary.at("added_per_call").get_object().if_contains(c.key);
    const json::value* wall = figures ? figures->get_object().if_contains("wall_turn_ms") : nullptr;
    if (!wall) continue;
    std::cout << "codex_seam: added_per_call " << c.key;
    for (auto kind : {"unpaired", "paired"})
      if (const json::value* f = wall->get_object().if_contains(kind))
        std::cout << " " << kind << " " << fixed(f->at("ms_per_call").to_number<double>(), 2) << " ms";
    std::cout << "\n";
  }

  return finish_report(o, summary, out, records);
}

}  // namespace

const VendorDriver kCodex = {
    .name = "codex",
    .program = "mh_codex_seam_bench",
    .variant_names = {"never_ask", "bare_driver", "", "metaharness_ask"},
    .default_runs = 5,
    .default_timeout_s = 120,
    .scenario = "codex_40_calls.json",
    .bin_env = "METAHARNESS_CODEX_BIN",
    .bin_under_vendor = mh::adapters::kCodexBinaryUnderVendor,
    .json_name = "codex-seam-bench.json",
    .default_hook_command = "",
    .usage =
        "  --variants LIST     comma-separated: never_ask,bare_driver,metaharness_ask (default all;\n"
        "                      never_ask is always run: every added time is measured against it)\n"
        "  --scenario FILE     default <source>/bench/scenarios/codex_40_calls.json\n"
        "  --codex FILE        default $METAHARNESS_CODEX_BIN or the pinned native binary in <source>/.vendor\n"
        "  --metaharness FILE  default: metaharness next to this program (mh-codex-hook beside it)\n"
        "  --model NAME        the model slug in config.toml (default gpt-5.5, the adapter's)\n"
        "  --work-dir DIR      where runs happen (default: a new directory under $TMPDIR or /tmp)\n"
        "  --json FILE         the JSON summary (default <work-dir>/codex-seam-bench.json)\n"
        "  --timeout-s N       bound on one run (default 120)\n",
    .responses_wire = true,
    .metaharness_helper = "mh-codex-hook",
    .metaharness = {.pass_locale = true,
                    .model_flag = true,
                    .seen_at_first_announcement = true,
                    .close_at_turn_end = true,
                    .check_stop_reason = true,
                    .strict_requests = true},
    .run_directly = &run_codex_directly,
    .read_latency_report = &read_latency_report,
    .after_metaharness_run = &read_hook_durations,
    .report = &report,
};

}  // namespace mh::seam
