// The report pieces every vendor's seam bench shares (bench/seam/seam.hpp): the completed runs
// of each variant, their pooled call cycles and latencies, the per-variant table and summary,
// the CPU table, and the JSON summary with the failed runs named.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "bench/seam/seam.hpp"
#include "daemon/model/scripted_endpoint.hpp"

namespace mh::seam {

Outcome::Outcome(const std::vector<RunRecord>& records) {
  for (const auto& r : records) {
    if (r.round < 0) continue;
    if (r.ok)
      ok[r.variant].push_back(&r);
    else
      ++failed[r.variant];
  }
}

std::vector<double> Outcome::values(Variant v, double RunRecord::*field) {
  std::vector<double> out;
  for (const RunRecord* r : ok[v])
    out.push_back(r->*field);
  return out;
}

std::vector<double> call_cycles(const Runs& runs) {
  std::vector<double> gaps;
  for (const RunRecord* r : runs)
    for (std::size_t i = 1; i < r->call_seen_ms.size(); ++i)
      gaps.push_back(r->call_seen_ms[i] - r->call_seen_ms[i - 1]);
  return gaps;
}

std::vector<double> call_latencies(const Runs& runs) {
  std::vector<double> all;
  for (const RunRecord* r : runs)
    all.insert(all.end(), r->call_latency_ms.begin(), r->call_latency_ms.end());
  return all;
}

double median_call_cycle(const Runs& runs) {
  return median(call_cycles(runs));
}

double median_call_latency(const Runs& runs) {
  return median(call_latencies(runs));
}

json::object summary_head(const Options& o, int calls) {
  json::object summary;
  summary["calls_per_turn"] = calls;
  summary["rounds"] = o.runs;
  summary["warmup_rounds"] = o.warmup;
  summary["scenario"] = o.scenario.string();
  summary[g_vendor->name] = o.vendor_bin.string();
  summary["metaharness"] = o.metaharness.string();
  return summary;
}

void print_cpu_table(const Options& o, Outcome& out) {
  // Where the CPU went: on 2 cores, CPU spent beside the CLI competes with the CLI.
  std::cout << "\nCPU per run in ms (child: the spawned process and what it reaped; bench: driver/client and, for the\n"
               "direct variants, the in-process endpoint), and the 1-minute load average at the start of each run\n";
  std::printf("%-16s %-22s %-22s %-22s %-16s\n", "variant", "child CPU", "bench CPU", "together", "load");
  for (Variant v : o.variants) {
    std::string child = spread_text(spread_of(out.values(v, &RunRecord::child_cpu_ms)), 0);
    std::string bench = spread_text(spread_of(out.values(v, &RunRecord::bench_cpu_ms)), 0);
    std::string together = spread_text(spread_of(out.values(v, &RunRecord::cpu_ms)), 0);
    std::string load = spread_text(spread_of(out.values(v, &RunRecord::load_before)), 1);
    std::printf("%-16s %-22s %-22s %-22s %-16s\n", std::string(name_of(v)).c_str(), child.c_str(), bench.c_str(),
                together.c_str(), load.c_str());
  }
}

int finish_report(const Options& o, const json::object& summary, const Outcome& out,
                  const std::vector<RunRecord>& records) {
  if (!o.json_out.empty()) {
    std::ofstream file(o.json_out, std::ios::trunc);
    file << json::serialize(summary) << "\n";
    std::cout << "\nsummary: " << o.json_out.string() << "\n";
  }
  int failures = 0;
  for (auto [v, n] : out.failed)
    failures += n;
  for (Variant v : o.variants)
    if (auto it = out.ok.find(v); it == out.ok.end() || it->second.empty()) ++failures;
  if (failures > 0) {
    std::cerr << g_vendor->program << ": " << failures << " run(s) did not complete; their directories are kept:\n";
    for (const auto& r : records)
      if (!r.ok)
        std::cerr << "  " << name_of(r.variant) << " round " << r.round << ": " << r.failure << " (" << r.dir.string()
                  << ")\n";
    return 1;
  }
  return 0;
}

namespace {

// A pooled set of per-call figures, sorted: its JSON (median, p10, p90, mean, max, n) and its
// cell "median [p10..p90]".
json::object pooled_json(std::vector<double>& pooled, std::string& cell) {
  std::sort(pooled.begin(), pooled.end());
  double mean = 0;
  for (double x : pooled)
    mean += x;
  if (!pooled.empty()) mean /= static_cast<double>(pooled.size());
  cell = fixed(median(pooled), 1) + " [" + fixed(quantile_of_sorted(pooled, 0.10), 1) + ".." +
         fixed(quantile_of_sorted(pooled, 0.90), 1) + "]";
  return json::object{{"median", median(pooled)},
                      {"p10", quantile_of_sorted(pooled, 0.10)},
                      {"p90", quantile_of_sorted(pooled, 0.90)},
                      {"mean", mean},
                      {"max", pooled.empty() ? 0.0 : pooled.back()},
                      {"n", pooled.size()}};
}

json::object run_json(const RunRecord& r, const VariantTable& t) {
  json::object run{{"round", r.round}, {"ok", r.ok}};
  if (!r.ok) run["failure"] = r.failure;
  if (!r.ok) run["dir"] = r.dir.string();
  run[t.turn_key] = r.wall_turn_ms;
  run["wall_end_ms"] = r.wall_end_ms;
  run["span_ms"] = r.span_ms;
  run["child_cpu_ms"] = r.child_cpu_ms;
  run["bench_cpu_ms"] = r.bench_cpu_ms;
  run["cpu_ms"] = r.cpu_ms;
  run["load_before"] = r.load_before;
  if (t.counts_aux_requests) run["aux_requests"] = r.aux_requests;
  json::array seen;
  for (double ms : r.call_seen_ms)
    seen.push_back(ms);
  run["call_seen_ms"] = std::move(seen);
  if (t.run_extras) t.run_extras(r, run);
  return run;
}

}  // namespace

json::object variant_table(const Options& o, int calls, Outcome& out, const std::vector<RunRecord>& records,
                           const VariantTable& t) {
  auto& ok = out.ok;
  std::cout << "\n"
            << t.seam_title << ": " << calls << " sequential " << t.call_kind << " calls per turn, " << o.runs
            << " interleaved rounds (+" << o.warmup << " warm-up)\n";
  std::cout << "times in ms: median [min..max] over the runs that completed; call cycle: median [p10..p90] of every\n"
               "gap between successive calls of every run; call latency: median [p10..p90] over every call of every\n"
               "run of "
            << t.latency_span << "\n\n";
  std::printf("%-16s %5s  %-22s %-22s %-22s %-20s %-20s\n", "variant", "ok", std::string(t.turn_title).c_str(),
              "spawn -> end of stream", "model request 1->N+1", "call cycle", "call latency");
  json::object variants;
  for (Variant v : o.variants) {
    json::object entry;
    std::vector<std::string> cells;
    for (auto [key, field] : {std::pair{t.turn_key, &RunRecord::wall_turn_ms},
                              std::pair{std::string_view("wall_end_ms"), &RunRecord::wall_end_ms},
                              std::pair{std::string_view("span_ms"), &RunRecord::span_ms}}) {
      Spread spread = spread_of(out.values(v, field));
      cells.push_back(spread_text(spread, 0));
      entry[key] = to_json(spread);
    }
    for (auto [key, pooled] :
         {std::pair{"call_cycle_ms", call_cycles(ok[v])}, std::pair{"call_latency_ms", call_latencies(ok[v])}}) {
      cells.emplace_back();
      entry[key] = pooled_json(pooled, cells.back());
    }
    for (auto [key, field] :
         {std::pair{"child_cpu_ms", &RunRecord::child_cpu_ms}, std::pair{"bench_cpu_ms", &RunRecord::bench_cpu_ms},
          std::pair{"cpu_ms", &RunRecord::cpu_ms}, std::pair{"load_before", &RunRecord::load_before}})
      entry[key] = to_json(spread_of(out.values(v, field)));
    entry["completed"] = ok[v].size();
    entry["failed"] = out.failed[v];
    if (t.counts_aux_requests) {
      int aux = 0;
      for (const RunRecord* r : ok[v])
        aux += r->aux_requests;
      entry["aux_requests"] = aux;
    }
    if (t.entry_extras) t.entry_extras(v, entry);
    if (v == Variant::bare_driver) {
      std::vector<double> reactions;
      for (const RunRecord* r : ok[v])
        reactions.insert(reactions.end(), r->driver_reaction_us.begin(), r->driver_reaction_us.end());
      entry["driver_reaction_us"] = to_json(spread_of(reactions));
    }
    json::array runs;
    for (const auto& r : records)
      if (r.variant == v) runs.push_back(run_json(r, t));
    entry["runs"] = std::move(runs);
    variants[name_of(v)] = std::move(entry);
    std::printf("%-16s %2zu/%-2d  %-22s %-22s %-22s %-20s %-20s\n", std::string(name_of(v)).c_str(), ok[v].size(),
                o.runs, cells[0].c_str(), cells[1].c_str(), cells[2].c_str(), cells[3].c_str(), cells[4].c_str());
  }
  return variants;
}

constexpr std::array<Metric, 6> kApprovalMetrics = [] {
  constexpr auto shared = shared_metrics("wall_turn_ms", "spawn -> turn end");
  // What the seam costs in CPU (the process tree plus the bench's driver and endpoint): on a
  // shared 2-core machine wall time moves with everyone else's load, CPU time far less.
  return std::array<Metric, 6>{shared[0], shared[1],
                               shared[2], shared[3],
                               shared[4], Metric{"cpu_ms", "CPU of the run", true, &median_of<&RunRecord::cpu_ms>}};
}();

void finish_direct_run(DirectChild& d, model::ScriptedEndpoint& endpoint, const DirectRun& how, RunRecord& r) {
  using namespace std::chrono_literals;
  const std::string vendor(how.vendor);
  std::optional<Clock::time_point> eof_at;
  std::optional<int> exit_status;
  if (r.failure.empty()) {
    d.child.close_stdin();  // the turn is over: the vendor exits on stdin EOF
    eof_at = d.reader->drain(d.deadline);
    if (!eof_at)
      r.failure = vendor + " did not close its stdout after stdin closed";
    else if (!(exit_status = d.child.wait_exit(*eof_at + 10s)))
      r.failure = vendor + " did not exit";
  }
  d.child.terminate(5s);
  r.child_cpu_ms = d.child.cpu_ms();
  endpoint.stop();
  if (d.c.o.keep) {
    std::ofstream out(r.dir / (vendor + "-stdout.jsonl"));
    for (const auto& l : d.transcript)
      out << l << "\n";
  }
  if (!r.failure.empty()) return;
  if (!WIFEXITED(*exit_status) || WEXITSTATUS(*exit_status) != 0)
    r.failure = vendor + " exit status " + std::to_string(WIFEXITED(*exit_status) ? WEXITSTATUS(*exit_status) : -1);
  if (r.failure.empty()) r.failure = d.problem;
  if (!r.failure.empty()) return;

  r.wall_turn_ms = ms_between(d.started, *d.turn_done_at);
  r.wall_end_ms = ms_between(d.started, *eof_at);
  std::vector<RunContext::Served> served;
  for (const auto& request : endpoint.requests())
    served.push_back(
        {std::string(mh::model::to_string(request.answer)), static_cast<double>(request.received_at.count())});
  r.failure = d.c.check_requests(served, r);
  if (r.failure.empty() && how.answers_expected && r.calls_answered != d.c.calls)
    r.failure = "answered " + std::to_string(r.calls_answered) + " " + std::string(how.answered_what) + ", not " +
                std::to_string(d.c.calls);
  if (r.failure.empty()) r.failure = d.c.check_files(how.work);
  r.ok = r.failure.empty();
}

std::string read_own_shares(const json::object& report, RunRecord& r) {
  for (auto name : kOwnShares) {
    const json::value* found = report.if_contains(name);
    const json::object* section = found && found->is_object() ? &found->get_object() : nullptr;
    if (!section) return "the latency report lacks " + std::string(name);
    auto& samples = r.own_share_us[std::string(name)];
    if (const json::value* raw = section->if_contains("samples_us"); raw && raw->is_array())
      for (const auto& s : raw->get_array())
        if (s.is_number()) samples.push_back(s.to_number<double>());
  }
  return "";
}

int approval_report(const ApprovalReport& shape, const Options& o, int calls, const std::vector<RunRecord>& records) {
  Outcome out(records);
  auto& ok = out.ok;
  auto has = [&](Variant v) { return std::find(o.variants.begin(), o.variants.end(), v) != o.variants.end(); };

  json::object summary = summary_head(o, calls);
  summary["model"] = o.model;
  summary["hardware_concurrency"] = std::thread::hardware_concurrency();
  VariantTable table{.seam_title = shape.seam_title,
                     .call_kind = shape.call_kind,
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
  // Two estimates of each. "unpaired" is the definition: (median of the variant's runs -
  // median of the other's) / N, runs resampled per variant for the interval. "paired" uses the
  // interleaving: the two runs of one round ran seconds apart, under nearly the same load from
  // the rest of the machine, so the median over rounds of the within-round difference (rounds
  // resampled for the interval) is far less moved by load that drifts over minutes.
  //
  // Call latency is compared with the floor only where the vendor announces a call at the same
  // point in both (shape.latency_against_floor).
  struct Comparison {
    Variant variant, against;
    std::string key;
  };
  auto compared = [](Variant a, Variant b) {
    return Comparison{a, b, std::string(name_of(a)) + "_vs_" + std::string(name_of(b))};
  };
  const std::array<Comparison, 3> comparisons = {compared(Variant::bare_driver, Variant::floor),
                                                 compared(Variant::metaharness_ask, Variant::floor),
                                                 compared(Variant::metaharness_ask, Variant::bare_driver)};
  auto comparable = [&shape](const Comparison& c, const Metric& m) {
    return m.key != "call_latency_ms" || c.against != Variant::floor || shape.latency_against_floor;
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
      for (const auto& m : kApprovalMetrics) {
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
    if (!shape.helper_title.empty())
      std::printf("\n%s, ms: %zu runs, median %.1f [p10 %.1f .. p90 %.1f], max %.1f\n",
                  std::string(shape.helper_title).c_str(), hooks.size(), median(hooks), quantile_of_sorted(hooks, 0.10),
                  quantile_of_sorted(hooks, 0.90), hooks.empty() ? 0.0 : hooks.back());
    if (!shape.helper_title.empty())
      summary["hook_run_ms"] = json::object{{"median", median(hooks)},
                                            {"p10", quantile_of_sorted(hooks, 0.10)},
                                            {"p90", quantile_of_sorted(hooks, 0.90)},
                                            {"max", hooks.empty() ? 0.0 : hooks.back()},
                                            {"n", hooks.size()}};
  }

  // One machine-readable line per comparison on the metric, for scripts/bench.sh.
  std::cout << "\n";
  for (const auto& c : comparisons) {
    const json::value* figures = summary.at("added_per_call").get_object().if_contains(c.key);
    const json::value* wall = figures ? figures->get_object().if_contains("wall_turn_ms") : nullptr;
    if (!wall) continue;
    std::cout << shape.line_prefix << ": added_per_call " << c.key;
    for (auto kind : {"unpaired", "paired"})
      if (const json::value* f = wall->get_object().if_contains(kind))
        std::cout << " " << kind << " " << fixed(f->at("ms_per_call").to_number<double>(), 2) << " ms";
    std::cout << "\n";
  }

  return finish_report(o, summary, out, records);
}

}  // namespace mh::seam
