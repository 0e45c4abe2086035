#include "bench/fleet_daemon_bench.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <thread>

#include "testkit/daemon_process.hpp"
#include "testkit/socket_client.hpp"

namespace mh::bench {

namespace {

namespace json = boost::json;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using testkit::LineClient;
using testkit::socket_request;

double us(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

void write_script(const fs::path& path, const json::array& steps) {
  std::ofstream(path) << json::serialize(json::object{
      {"format", "mh-standin-claude.script/1"}, {"description", "mh_fleet_bench"}, {"turns", json::array{steps}}});
}

std::string daemon_config(const mh::test::NatsCluster& cluster, const FleetDaemonOptions& o, int i) {
  return "[vendor]\nclaude = \"" + o.standin.string() + "\"\n[runs]\nmax_active = 500\nsandbox_read_only = [\"" +
         o.work_dir.string() + "\"]\n[server]\nmax_connections = 1024\n[log]\nlevel = \"warning\"\n" +
         // root (the bench) submits --fleet as a control peer: a peer host may not act for an
         // admin's uid (docs/fleet.md, Trust).
         "[access]\nroot_is_admin = false\nowner_is_admin = false\ncontrol_uids = [0]\n" + "[fleet]\nnats_urls = [\"" +
         cluster.url(i) + "\"]\nhost_id = \"h" + std::to_string(i) +
         "\"\nreplicas = 3\nprefix = \"bd\"\nrequest_timeout_ms = 10000\ninsecure_no_credentials = true\n";
}

std::optional<std::uint64_t> seq_of(const std::string& line) {
  auto o = testkit::parse_object(line);
  if (!o || !o->contains("event")) return std::nullopt;
  const json::value* seq = o->if_contains("seq");
  if (!seq || !seq->is_number()) return std::nullopt;
  return seq->to_number<std::uint64_t>();
}

// Reads a tail's lines to its `end`, stamping each event line's arrival by seq.
void read_stream(LineClient& c, std::map<std::uint64_t, Clock::time_point>& arrived) {
  for (;;) {
    auto line = c.next_line(120s);
    if (!line) return;
    auto now = Clock::now();
    if (testkit::string_field(*line, "reply") == "end") return;
    if (auto seq = seq_of(*line)) arrived.emplace(*seq, now);
  }
}

// A `submit` with the run on `socket`, its `submitted` reply's fields (or nullopt).
std::optional<json::object> submit(LineClient& c, const json::object& run, bool fleet, const std::string& id) {
  json::object fields{{"run", run}};
  if (fleet) fields["fleet"] = true;
  if (!c.send_line(socket_request("submit", id, fields))) return std::nullopt;
  for (auto deadline = Clock::now() + 60s; Clock::now() < deadline;) {
    auto line = c.next_line(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
    if (!line) break;
    auto reply = testkit::string_field(*line, "reply");
    if (reply == "submitted") return testkit::parse_object(*line);
    if (reply == "refused") {
      std::fprintf(stderr, "fleet_bench (daemons): submit refused: %s\n", line->c_str());
      break;
    }
  }
  return std::nullopt;
}

// A run on the daemon behind `c` itself (not through the fleet's queue): its id, or nullopt.
std::optional<std::string> submit_here(LineClient& c, const fs::path& script, std::string_view decisions,
                                       const std::string& id) {
  auto reply = submit(c, testkit::standin_run_spec(script, decisions), false, id);
  if (!reply || !reply->contains("run_id") || !reply->at("run_id").is_string()) return std::nullopt;
  return std::string(reply->at("run_id").as_string());
}

// Sends `request` on `c` until its answer is `ok` (a run enters the fleet's records only when its
// publisher starts, so another host may not know it yet), for 30 s at most.
bool ask_until(LineClient& c, const std::string& request, const std::function<bool(const std::string&)>& ok) {
  for (auto deadline = Clock::now() + 30s; Clock::now() < deadline;) {
    c.send_line(request);
    auto answer = c.next_line(10s);
    if (answer && ok(*answer)) return true;
  }
  return false;
}

}  // namespace

void report_us(const char* what, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return v.empty() ? 0.0 : v[std::min(v.size() - 1, static_cast<std::size_t>(q * v.size()))];
  };
  std::printf("%-44s n=%-5zu p50 %9.1f us   p99 %9.1f us   max %9.1f us\n", what, v.size(), at(0.5), at(0.99),
              v.empty() ? 0.0 : v.back());
}

int bench_fleet_daemons(const mh::test::NatsCluster& cluster, const FleetDaemonOptions& o) {
  auto fail = [](const std::string& why) {
    std::fprintf(stderr, "fleet_bench (daemons): %s\n", why.c_str());
    return 2;
  };
  fs::create_directories(o.work_dir);
  const fs::path quick = o.work_dir / "quick.json", paced = o.work_dir / "paced.json", held = o.work_dir / "held.json";
  write_script(quick, json::array{json::object{{"type", "text"}, {"text", "ok"}}});
  {
    json::array steps{json::object{{"type", "wait"}, {"ms", 2000}}};  // both readers are open by then
    for (int i = 0; i < o.lines; ++i) {
      steps.push_back(json::object{{"type", "text"}, {"text", "a line of about a hundred bytes, as a model's text"}});
      steps.push_back(json::object{{"type", "wait"}, {"ms", 20}});
    }
    write_script(paced, steps);
  }
  {
    // One Bash call per decision timed (two per round: routed, then local), each held until decided.
    json::array steps;
    for (int i = 0; i < 2 * o.decisions; ++i)
      steps.push_back(json::object{{"type", "tool_use"},
                                   {"id", "toolu_held_" + std::to_string(i)},
                                   {"name", "Bash"},
                                   {"input", json::object{{"command", "true"}, {"description", "held"}}}});
    steps.push_back(json::object{{"type", "text"}, {"text", "Done."}});
    write_script(held, steps);
  }
  std::vector<std::unique_ptr<testkit::DaemonProcess>> daemons;
  for (int i = 0; i < 3; ++i) {
    const fs::path home = o.work_dir / ("h" + std::to_string(i));
    fs::create_directories(home);
    daemons.push_back(
        std::make_unique<testkit::DaemonProcess>(home, o.metaharness, home / "state", daemon_config(cluster, o, i)));
    if (auto e = daemons.back()->start_until_ready(); !e.empty()) return fail("h" + std::to_string(i) + ": " + e);
  }
  std::printf("through the daemons: 3 metaharness daemons (stand-in harness), each on its own node\n");

  // submit -> placed, one at a time.
  {
    LineClient c(daemons[0]->socket());
    std::vector<double> v;
    for (int i = 0; i < o.submits; ++i) {
      auto t0 = Clock::now();
      auto reply = submit(c, testkit::standin_run_spec(quick, "observe"), true, "s" + std::to_string(i));
      if (!reply) return fail("a fleet submit was not answered");
      if (reply->contains("placement") && reply->at("placement") == "placed") v.push_back(us(Clock::now() - t0));
    }
    report_us("daemons: submit --fleet -> submitted, placed", v);
  }
  // An event fleet-wide after its local write: a paced run on h0, read on h0 and from h1.
  {
    LineClient c(daemons[0]->socket());
    auto run = submit_here(c, paced, "observe", "paced");
    if (!run) return fail("the paced run was not submitted");
    LineClient local(daemons[0]->socket()), fleet(daemons[1]->socket());
    local.send_line(socket_request("tail", "t", json::object{{"run_id", *run}, {"from_seq", 1}, {"follow", true}}));
    auto tail = socket_request("tail", "f", json::object{{"run_id", *run}, {"from_seq", 1}, {"follow", true}});
    if (!ask_until(fleet, tail, [](const std::string& l) { return testkit::string_field(l, "reply") == "tailing"; }))
      return fail("h1 could not tail the paced run from the fleet");
    const auto both_open = Clock::now();
    std::map<std::uint64_t, Clock::time_point> at_local, at_fleet;
    std::thread reader([&] { read_stream(fleet, at_fleet); });
    read_stream(local, at_local);
    reader.join();
    std::vector<double> v;
    for (auto& [seq, t] : at_local)
      if (t > both_open && at_fleet.count(seq)) v.push_back(us(at_fleet[seq] - t));
    report_us("daemons: event local tail -> fleet tail (h1)", v);
  }
  // A decision round trip: each of the run's calls, as it is asked (a local tail on h0 sees its
  // tool.requested), decided allow from h1 (routed to h0) or on h0 itself, alternately; timed
  // from the `command` sent to its `result` (the run's command.result recorded, outcome ok).
  {
    LineClient c(daemons[0]->socket());
    auto held_run = submit_here(c, held, "ask", "held");
    if (!held_run) return fail("the held run was not submitted");
    const std::string run = *held_run;
    LineClient from_h1(daemons[1]->socket()), watch(daemons[0]->socket());
    if (!ask_until(from_h1, socket_request("get", "g", json::object{{"run_id", run}}),
                   [](const std::string& l) { return testkit::string_field(l, "host") == "h0"; }))
      return fail("h1 never learnt of the held run");
    watch.send_line(socket_request("tail", "w", json::object{{"run_id", run}, {"from_seq", 1}, {"follow", true}}));
    std::vector<double> routed, local;
    for (int i = 0; i < 2 * o.decisions; ++i) {
      std::string call;
      while (call.empty()) {
        auto line = watch.next_line(60s);
        if (!line) return fail("the held run asked no further call");
        auto event = testkit::parse_object(*line);
        if (event && testkit::string_field(*line, "event") == "tool.requested")
          call = std::string(event->at("call_id").as_string());
      }
      LineClient* side = i % 2 == 0 ? &from_h1 : &c;
      const json::object command{{"format", "metaharness.command/1"},
                                 {"id", "d" + std::to_string(i)},
                                 {"command", "tool.decide"},
                                 {"call_id", call},
                                 {"decision", "allow"}};
      auto t0 = Clock::now();
      side->send_line(
          socket_request("command", "c" + std::to_string(i), json::object{{"run_id", run}, {"command", command}}));
      auto result = side->wait_reply("result", 60s);
      const json::object* outcome = result && result->contains("outcome") ? result->at("outcome").if_object() : nullptr;
      if (!outcome || !outcome->contains("result") || outcome->at("result") != "ok")
        return fail("a decision was not answered ok: " + (result ? json::serialize(*result) : std::string("none")));
      (side == &c ? local : routed).push_back(us(Clock::now() - t0));
    }
    report_us("daemons: decision from another host (routed)", routed);
    report_us("daemons: the same decision on the owner's host", local);
  }
  // Placement throughput: many fleet submits at once from h0, three hosts placing.
  {
    const int connections = 20;
    std::atomic<int> placed{0}, answered{0};
    auto t0 = Clock::now();
    std::vector<std::thread> threads;
    for (int k = 0; k < connections; ++k)
      threads.emplace_back([&, k] {
        LineClient c(daemons[0]->socket());
        for (int i = k; i < o.placements; i += connections) {
          auto reply = submit(c, testkit::standin_run_spec(quick, "observe"), true, "p" + std::to_string(i));
          if (!reply) return;
          ++answered;
          if (reply->contains("placement") && reply->at("placement") == "placed") ++placed;
        }
      });
    for (auto& t : threads)
      t.join();
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (answered.load() != o.placements) return fail("fleet submits went unanswered");
    std::printf("%-44s %d runs (%d placed at once) in %.2f s: %.0f runs/s\n", "daemons: placement throughput, 3 hosts",
                o.placements, placed.load(), s, o.placements / s);
  }
  for (auto& d : daemons)
    (void)d->stop(30s);
  return 0;
}

}  // namespace mh::bench
