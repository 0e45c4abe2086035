// The Claude Code row of the call seam bench (seam/seam.hpp): the real claude CLI driven
// directly over stream-json, four variants:
//
//   baseline         no hook; Bash pre-approved with --allowedTools Bash (bench drives claude)
//   bare_driver      the bench drives claude itself: initialize registers a PreToolUse hook
//                    callback for every tool; every hook_callback is answered allow at once
//   command_hook     a --settings PreToolUse command hook (matcher "*") that prints an allow
//   metaharness_ask  `metaharness run claude --decisions ask` (shared: seam_bench.cpp)
//
// Its report judges issue 3's goals: metaharness's added time per call within 1 ms of the bare
// driver and at most half the command hook's; its own in-process share p50 <= 100 us, p99 <= 1 ms.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "adapters/claude/claude_adapter.hpp"
#include "bench/seam/seam.hpp"
#include "daemon/model/scripted_endpoint.hpp"

namespace mh::seam {
namespace {

using namespace std::chrono_literals;

// An assistant or user record's message.content blocks (null when it has none).
const json::array* message_content(const json::object& record) {
  const json::value* message = record.if_contains("message");
  const json::value* content = message && message->is_object() ? message->get_object().if_contains("content") : nullptr;
  return content && content->is_array() ? &content->get_array() : nullptr;
}

void run_claude_directly(const RunContext& c, RunRecord& r) {
  const fs::path home = r.dir / "home", config = home / ".claude", tmp = r.dir / "tmp", work = r.dir / "work";
  for (const auto& d : {home, config, tmp, work})
    fs::create_directories(d);

  auto endpoint = c.start_endpoint(r);
  if (!endpoint) return;

  std::vector<std::string> args = {
      "-p", "--input-format",     "stream-json", "--output-format", "stream-json", "--verbose", "--setting-sources",
      "",   "--strict-mcp-config"};
  if (r.variant == Variant::floor) args.insert(args.end(), {"--allowedTools", "Bash"});
  if (r.variant == Variant::command_hook) {
    json::object hook{{"type", "command"}, {"command", c.o.hook_command}, {"timeout", 60}};
    json::object matcher{{"matcher", "*"}, {"hooks", json::array{hook}}};
    json::object settings{{"hooks", json::object{{"PreToolUse", json::array{matcher}}}}};
    fs::path settings_file = r.dir / "settings.json";
    std::ofstream(settings_file) << json::serialize(settings) << "\n";
    args.insert(args.end(), {"--settings", settings_file.string()});
  }
  std::vector<std::string> env = {"HOME=" + home.string(),
                                  "CLAUDE_CONFIG_DIR=" + config.string(),
                                  "PATH=/usr/local/bin:/usr/bin:/bin",
                                  "TMPDIR=" + tmp.string(),
                                  "ANTHROPIC_BASE_URL=" + endpoint->base_url(),
                                  "ANTHROPIC_AUTH_TOKEN=" + endpoint->token(),
                                  "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"};

  const json::object user_line{
      {"type", "user"},
      {"session_id", ""},
      {"message",
       json::object{{"role", "user"}, {"content", json::array{json::object{{"type", "text"}, {"text", c.o.prompt}}}}}},
      {"parent_tool_use_id", nullptr}};
  const std::string user = json::serialize(user_line);
  // The same registration metaharness makes: one callback for every tool.
  const std::string initialize =
      R"({"type":"control_request","request_id":"init_1","request":{"subtype":"initialize","hooks":{"PreToolUse":[{"matcher":"*","hookCallbackIds":["h"],"timeout":60}]}}})";

  Subprocess child;
  child.track_in(&g_running_child);
  const Clock::time_point started = Clock::now();
  const Clock::time_point deadline = c.deadline_from(started);
  if (auto error = child.spawn(
          {.program = c.o.vendor_bin, .args = args, .env = env, .cwd = work, .stderr_file = r.dir / "stderr.txt"});
      !error.empty()) {
    r.failure = error;
    return;
  }
  LineReader reader(child.stdout_fd(), &g_stop_requested);
  bool initialized = r.variant != Variant::bare_driver;
  // Like metaharness, the bare driver sends the prompt once the seam is installed.
  if (!initialized)
    child.write_line(initialize);
  else
    child.write_line(user);

  std::string line;
  Clock::time_point read_at;
  std::optional<Clock::time_point> result_at;
  std::string result_problem;
  while (!result_at) {
    auto object = next_object(reader, line, read_at, deadline, "the result", r);
    if (!object) break;
    const json::object& record = *object;
    const json::value* type = record.if_contains("type");
    if (!type || !type->is_string()) continue;
    if (type->get_string() == "control_request") {
      const json::value* request = record.if_contains("request");
      const json::value* id = record.if_contains("request_id");
      if (!request || !request->is_object() || !id || !id->is_string()) continue;
      const json::value* subtype = request->get_object().if_contains("subtype");
      if (!subtype || !subtype->is_string() || subtype->get_string() != "hook_callback") continue;
      std::string answer =
          R"({"type":"control_response","response":{"subtype":"success","request_id":)" + json::serialize(*id) +
          R"(,"response":{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}}})";
      child.write_line(answer);
      r.driver_reaction_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - read_at).count());
      ++r.calls_answered;
    } else if (type->get_string() == "assistant") {
      if (const json::array* content = message_content(record))
        for (const auto& block : *content)
          if (block.is_object() && block.get_object().if_contains("type") &&
              block.get_object().at("type") == "tool_use") {
            r.call_seen_ms.push_back(ms_between(started, read_at));
            if (const json::value* id = block.get_object().if_contains("id"); id && id->is_string())
              r.seen_by_id[std::string(id->get_string())] = ms_between(started, read_at);
          }
    } else if (type->get_string() == "user") {
      if (const json::array* content = message_content(record))
        for (const auto& block : *content)
          if (block.is_object() && block.get_object().if_contains("tool_use_id") &&
              block.get_object().at("tool_use_id").is_string())
            r.done_by_id[std::string(block.get_object().at("tool_use_id").get_string())] = ms_between(started, read_at);
    } else if (type->get_string() == "control_response" && !initialized) {
      initialized = true;
      child.write_line(user);
    } else if (type->get_string() == "result") {
      result_at = read_at;
      const json::value* subtype = record.if_contains("subtype");
      const json::value* is_error = record.if_contains("is_error");
      const json::value* denials = record.if_contains("permission_denials");
      if (!subtype || *subtype != "success" || !is_error || *is_error != false)
        result_problem = "the turn did not succeed: " + line.substr(0, 300);
      else if (denials && denials->is_array() && !denials->get_array().empty())
        result_problem = "some calls were denied: " + json::serialize(*denials).substr(0, 300);
    }
  }
  std::optional<Clock::time_point> eof_at;
  if (result_at) {
    child.close_stdin();  // the turn is over: claude exits 0
    eof_at = reader.drain(deadline);
    if (!eof_at) r.failure = "claude did not close its stdout after stdin closed";
  }
  if (r.failure.empty() && !child.wait_exit(eof_at ? *eof_at + 10s : deadline)) r.failure = "claude did not exit";
  child.kill_and_reap();
  r.child_cpu_ms = child.cpu_ms();
  endpoint->stop();
  if (!r.failure.empty()) return;

  r.wall_turn_ms = ms_between(started, *result_at);
  r.wall_end_ms = ms_between(started, *eof_at);
  std::vector<double> received;
  for (const auto& request : endpoint->requests())
    if (request.answer == mh::model::Answer::step) received.push_back(static_cast<double>(request.received_at.count()));
  r.failure = result_problem;
  if (r.failure.empty()) r.failure = c.span_from(received, r);
  if (r.failure.empty() && r.variant == Variant::bare_driver && r.calls_answered != c.calls)
    r.failure = "answered " + std::to_string(r.calls_answered) + " hook_callbacks, not " + std::to_string(c.calls);
  if (r.failure.empty()) r.failure = c.check_files(work);
  r.ok = r.failure.empty();
}

std::string read_latency_report(const json::object& report, RunRecord& r) {
  auto summary = [](const json::value* s) -> std::optional<LatencySummary> {
    if (!s || !s->is_object()) return std::nullopt;
    const auto& o = s->get_object();
    LatencySummary l;
    l.samples = o.at("samples").to_number<std::uint64_t>();
    if (l.samples == 0) return l;
    l.p50_us = o.at("p50_us").to_number<double>();
    l.p90_us = o.at("p90_us").to_number<double>();
    l.p99_us = o.at("p99_us").to_number<double>();
    l.max_us = o.at("max_us").to_number<double>();
    return l;
  };
  r.line_to_requested = summary(report.if_contains("line_to_requested"));
  r.decide_to_answer = summary(report.if_contains("decide_to_answer"));
  if (!r.line_to_requested || !r.decide_to_answer) return "the latency report lacks a section";
  return "";
}

constexpr std::array<Metric, 5> kMetrics = shared_metrics("wall_result_ms", "spawn -> result");

std::optional<double> added_per_call(const Metric& m, const Runs& variant, const Runs& baseline, int calls) {
  if (variant.empty() || baseline.empty()) return std::nullopt;
  double difference = m.statistic(variant) - m.statistic(baseline);
  return m.per_turn ? difference / calls : difference;
}

int report(const Options& o, int calls, const std::vector<RunRecord>& records) {
  Outcome out(records);
  auto& ok = out.ok;
  auto added = [&](const Metric& m, Variant v) { return added_per_call(m, ok[v], ok[Variant::floor], calls); };

  json::object summary = summary_head(o, calls);
  summary["command_hook"] = o.hook_command;
  summary["hardware_concurrency"] = std::thread::hardware_concurrency();
  VariantTable table{
      .seam_title = "Claude call seam",
      .call_kind = "Bash",
      .turn_key = "wall_result_ms",
      .turn_title = "spawn -> result",
      .latency_span = "tool_use seen -> tool_result seen",
      .counts_aux_requests = false,
      .entry_extras =
          [&](Variant v, json::object& entry) {
            json::object added_json;
            for (const auto& m : kMetrics)
              if (auto a = added(m, v)) added_json[m.key] = *a;
            entry["added_ms_per_call_vs_baseline"] = std::move(added_json);
          },
      // metaharness's in-process percentiles of each run.
      .run_extras =
          [](const RunRecord& r, json::object& run) {
            if (r.line_to_requested) run["line_to_requested_p50_us"] = r.line_to_requested->p50_us;
            if (r.line_to_requested) run["line_to_requested_p99_us"] = r.line_to_requested->p99_us;
            if (r.decide_to_answer) run["decide_to_answer_samples"] = r.decide_to_answer->samples;
            if (r.decide_to_answer && r.decide_to_answer->samples)
              run["decide_to_answer_p50_us"] = r.decide_to_answer->p50_us;
            if (r.decide_to_answer && r.decide_to_answer->samples)
              run["decide_to_answer_p99_us"] = r.decide_to_answer->p99_us;
          },
  };
  summary["variants"] = variant_table(o, calls, out, records, table);

  print_cpu_table(o, out);

  std::cout << "\nadded ms per call vs baseline: (median(variant) - median(baseline)) / " << calls
            << "; call cycle and latency: difference of the medians\n";
  std::printf("%-16s %-18s %-24s %-22s %-18s %-18s\n", "variant", "spawn -> result", "spawn -> end of stream",
              "model request 1->N+1", "median call cycle", "median call latency");
  for (Variant v : o.variants) {
    if (v == Variant::floor) continue;
    std::vector<std::string> cells;
    for (const auto& m : kMetrics) {
      auto a = added(m, v);
      cells.push_back(a ? fixed(*a, 2) : "n/a");
    }
    std::printf("%-16s %-18s %-24s %-22s %-18s %-18s\n", std::string(name_of(v)).c_str(), cells[0].c_str(),
                cells[1].c_str(), cells[2].c_str(), cells[3].c_str(), cells[4].c_str());
  }

  // Goal 1: metaharness ask within 1 ms of the bare driver, and at most half a command hook's.
  // Judged on the issue's own definition (spawn -> result); the other metrics, and the 95%
  // bootstrap intervals, say how much of the verdict is the noise of this many runs.
  json::object goals;
  bool goal1_pass = true, goal1_known = true;
  std::cout << "\ngoal 1: metaharness ask added/call at most 1 ms above the bare driver's, and <= 0.5 x the command "
               "hook's\n";
  json::object goal1;
  const Runs &base = ok[Variant::floor], &bare = ok[Variant::bare_driver], &command = ok[Variant::command_hook],
             &mh = ok[Variant::metaharness_ask];
  for (const auto& m : kMetrics) {
    auto mh_added = added(m, Variant::metaharness_ask);
    auto bare_added = added(m, Variant::bare_driver);
    auto command_added = added(m, Variant::command_hook);
    if (!mh_added || !bare_added || !command_added) {
      if (m.key == "wall_result_ms") goal1_known = false;
      continue;
    }
    double difference = *mh_added - *bare_added;
    double ratio = *command_added > 0 ? *mh_added / *command_added : 0;
    // "Within 1 ms" bounds what metaharness adds on top of the bare driver; measuring it below
    // the bare driver is noise in metaharness's favour, not a failure.
    bool pass = difference <= 1.0 && *command_added > 0 && ratio <= 0.5;
    auto difference_interval = bootstrap_interval(std::vector<Runs>{mh, bare}, [&](const std::vector<Runs>& g) {
      return std::optional<double>((m.statistic(g[0]) - m.statistic(g[1])) / (m.per_turn ? calls : 1));
    });
    auto ratio_interval = bootstrap_interval(std::vector<Runs>{mh, command, base}, [&](const std::vector<Runs>& g) {
      double b = m.statistic(g[2]);
      double c = m.statistic(g[1]) - b;
      return c > 0 ? std::optional<double>((m.statistic(g[0]) - b) / c) : std::nullopt;
    });
    json::object g{{"metaharness_added_ms", *mh_added},       {"bare_driver_added_ms", *bare_added},
                   {"command_hook_added_ms", *command_added}, {"metaharness_minus_bare_ms", difference},
                   {"metaharness_over_command_hook", ratio},  {"pass", pass}};
    if (difference_interval)
      g["metaharness_minus_bare_ms_95"] = json::array{difference_interval->first, difference_interval->second};
    if (ratio_interval)
      g["metaharness_over_command_hook_95"] = json::array{ratio_interval->first, ratio_interval->second};
    std::printf("  %-24s difference %+6.2f ms", std::string(m.title).c_str(), difference);
    if (difference_interval)
      std::printf(" (95%% %+.2f..%+.2f)", difference_interval->first, difference_interval->second);
    std::printf("  ratio %5.2f", ratio);
    if (ratio_interval) std::printf(" (95%% %.2f..%.2f)", ratio_interval->first, ratio_interval->second);
    std::printf("  %s%s\n", pass ? "PASS" : "FAIL", m.key == "wall_result_ms" ? "  <- judged" : "");
    if (m.key == "wall_result_ms") goal1_pass = pass;
    goal1[m.key] = std::move(g);
  }
  goal1["judged_on"] = "wall_result_ms";
  goals["added_per_call"] = std::move(goal1);

  // Goal 2: metaharness's own share, from its in-process latency reports. Each report holds
  // per-run percentiles, not samples: the pooled p50 is given as the median of the per-run p50s,
  // and the pooled p99 is bounded above by the largest per-run p99 (with N samples a run, a
  // run's p99 is its maximum); the goal is judged on that bound. decide_to_answer only has a
  // sample when the hook_callback was already waiting when the tool.decide arrived.
  bool goal2_pass = true, goal2_known = false;
  json::object goal2;
  std::cout << "\ngoal 2: metaharness's own share (in-process), p50 <= 100 us, p99 <= 1000 us\n";
  for (auto [key, field] : {std::pair{"line_to_requested", &RunRecord::line_to_requested},
                            std::pair{"decide_to_answer", &RunRecord::decide_to_answer}}) {
    std::vector<double> p50, p99, maxima;
    std::uint64_t samples = 0;
    for (const RunRecord* r : mh) {
      const auto& l = r->*field;
      if (!l || l->samples == 0) continue;
      samples += l->samples;
      p50.push_back(l->p50_us);
      p99.push_back(l->p99_us);
      maxima.push_back(l->max_us);
    }
    if (p50.empty()) {
      std::printf("  %-18s no samples\n", key);
      goal2[key] = json::object{{"samples", 0}};
      continue;
    }
    goal2_known = true;
    Spread s50 = spread_of(p50), s99 = spread_of(p99);
    bool pass = s50.median <= 100.0 && s99.max <= 1000.0;
    goal2_pass = goal2_pass && pass;
    std::printf("  %-18s samples %4llu  per-run p50 %s us  per-run p99 %s us  %s\n", key,
                static_cast<unsigned long long>(samples), spread_text(s50, 1).c_str(), spread_text(s99, 1).c_str(),
                pass ? "PASS" : "FAIL");
    goal2[key] = json::object{{"samples", samples},
                              {"runs_with_samples", p50.size()},
                              {"per_run_p50_us", to_json(s50)},
                              {"per_run_p99_us", to_json(s99)},
                              {"max_us", spread_of(maxima).max},
                              {"pass", pass}};
  }
  goals["own_share"] = std::move(goal2);
  goals["added_per_call_pass"] = goal1_known && goal1_pass;
  goals["own_share_pass"] = goal2_known && goal2_pass;
  summary["goals"] = std::move(goals);

  // One machine-readable line per goal, for scripts/bench.sh.
  auto verdict = [](bool known, bool pass) { return !known ? "n/a" : pass ? "PASS" : "FAIL"; };
  std::cout << "\nseam: goal added_per_call " << verdict(goal1_known, goal1_pass) << "\n";
  std::cout << "seam: goal own_share " << verdict(goal2_known, goal2_pass) << "\n";

  return finish_report(o, summary, out, records);
}

}  // namespace

// The conventional cheapest shell form of a command hook: drain the hook input (so the CLI's
// write never meets a closed pipe), print the allow. One /bin/sh plus one cat per call, which
// is what a real command hook costs at the very least (real ones are usually python or node
// scripts, costing tens of milliseconds more), so it is the strictest yardstick for
// "at most half of a command hook's".
constexpr std::string_view kDefaultHookCommand =
    R"(cat >/dev/null; printf '%s\n' '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}')";

const VendorDriver kClaude = {
    .name = "claude",
    .is_default = true,
    .variant_names = {"baseline", "bare_driver", "command_hook", "metaharness_ask"},
    .default_runs = 7,
    .bin_under_vendor = mh::adapters::claude::kBinaryUnderVendor,
    .bin_default = "<source>/.vendor/.../claude",
    .json_name = "seam-bench.json",
    .default_hook_command = kDefaultHookCommand,
    .run_directly = &run_claude_directly,
    .read_latency_report = &read_latency_report,
    .report = &report,
};

// This row, registered from its own file (seam.hpp).
[[maybe_unused]] const bool kClaudeRegistered = register_driver(&kClaude);

}  // namespace mh::seam
