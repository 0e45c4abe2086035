// The report pieces every vendor's seam bench shares (bench/seam/seam.hpp): the completed runs
// of each variant, their pooled call cycles and latencies, the per-variant table and summary,
// the CPU table, and the JSON summary with the failed runs named.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "bench/seam/seam.hpp"

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

}  // namespace mh::seam
