#include "bench/fleet_daemon_bench.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "daemon/fleet/event_publisher.hpp"
#include "daemon/fleet/fleet_link.hpp"
#include "daemon/fleet/fleet_reader.hpp"
#include "testkit/daemon_process.hpp"
#include "testkit/socket_client.hpp"
#include "tests/standin/standin_identity.hpp"

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
      {"format", mh::standin::kScriptFormat}, {"description", "mh_fleet_bench"}, {"turns", json::array{steps}}});
}

std::string daemon_config(const mh::test::NatsCluster& cluster, const FleetDaemonOptions& o, int i,
                          const std::string& prefix = "bd", bool serial = false, int batch = 0) {
  return "[vendor]\n" + std::string(mh::standin::kAdapter) + " = \"" + o.standin.string() +
         "\"\n[runs]\nmax_active = 500\nsandbox_read_only = [\"" + o.work_dir.string() +
         "\"]\n[server]\nmax_connections = 1024\n[log]\nlevel = \"warning\"\n" +
         // root (the bench) submits --fleet as a control peer: a peer host may not act for an
         // admin's uid (docs/fleet.md, Trust).
         "[access]\nroot_is_admin = false\nowner_is_admin = false\ncontrol_uids = [0]\n" + "[fleet]\nnats_urls = [\"" +
         cluster.url(i) + "\"]\nhost_id = \"h" + std::to_string(i) + "\"\nreplicas = 3\nprefix = \"" + prefix +
         "\"\nrequest_timeout_ms = 10000\ninsecure_no_credentials = true\n" +
         (serial ? "serial_publish = true\n" : "") +
         (batch > 0 ? "publish_batch_lines = " + std::to_string(batch) + "\n" : "");
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

double loadavg1() {
  double l = 0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = 0;
    std::fclose(f);
  }
  return l;
}

struct PublishFigure {
  std::uint64_t lines = 0;
  double fleet_s = 0, local_s = 0, load_before = 0, load_after = 0;
  std::uint64_t messages = 0;  // what the events stream holds after the phase (lines in batches)
  int incomplete = 0;          // runs whose stream in JetStream was not 1..n in order, once each
  bool failed = false;
};

// One publishing phase: a fresh h0 (its own home and prefix), `publish_runs` chatty runs;
// `batch`: its fleet.publish_batch_lines.
PublishFigure publish_phase(const mh::test::NatsCluster& cluster, const FleetDaemonOptions& o, bool serial, int batch) {
  PublishFigure f;
  const std::string prefix = serial ? "ps" : "pp" + std::to_string(batch);
  const fs::path home = o.work_dir / ("publish-" + prefix), chatty = home / "chatty.json";
  fs::create_directories(home);
  {
    json::array steps;
    for (int i = 0; i < o.publish_lines; ++i)
      steps.push_back(json::object{
          {"type", "text"}, {"text", "a line of about a hundred bytes, as a model's text " + std::to_string(i)}});
    write_script(chatty, steps);
  }
  testkit::DaemonProcess daemon(home, o.metaharness, home / "state",
                                daemon_config(cluster, o, 0, prefix, serial, batch));
  if (auto e = daemon.start_until_ready(); !e.empty()) {
    std::fprintf(stderr, "fleet_bench (publish): h0: %s\n", e.c_str());
    f.failed = true;
    return f;
  }
  fleet::FleetConfig fc;
  fc.nats_urls = {cluster.url(1)};
  fc.host_id = "bench";
  fc.prefix = prefix;
  fc.request_timeout = std::chrono::seconds(10);
  auto link = fleet::FleetLink::connect(fc);
  if (!link) {
    std::fprintf(stderr, "fleet_bench (publish): %s\n", link.error().text.c_str());
    f.failed = true;
    return f;
  }
  const std::string stream = (*link)->names().events_stream();
  auto stored = [&]() -> std::uint64_t {
    jsStreamInfo* raw = nullptr;
    if (js_GetStreamInfo(&raw, (*link)->js(), stream.c_str(), nullptr, nullptr) != NATS_OK) return 0;
    fleet::StreamInfoHandle info(raw);
    return info->State.Msgs;
  };
  f.load_before = loadavg1();
  LineClient c(daemon.socket());
  std::vector<std::string> runs;
  const auto t0 = Clock::now();
  for (int i = 0; i < o.publish_runs; ++i) {
    auto run = submit_here(c, chatty, "observe", "c" + std::to_string(i));
    if (!run) {
      f.failed = true;
      return f;
    }
    runs.push_back(*run);
  }
  // Until every run is closed here (its last seq then final), then until the fleet holds them
  // all: each run's last line in the fleet is its last seq (runs looked at in turn, one request
  // a poll while the first unfinished one lags).
  std::map<std::string, std::uint64_t> last;
  std::optional<Clock::time_point> local_done;
  std::size_t in_fleet = 0;  // runs [0, in_fleet) complete in the fleet
  auto fleet_has_all = [&] {
    while (in_fleet < runs.size()) {
      auto tail = fleet::fleet_stream_tail(**link, runs[in_fleet]);
      if (!tail || tail->last_seq < last[runs[in_fleet]]) return false;
      ++in_fleet;
    }
    return true;
  };
  for (auto deadline = Clock::now() + 600s; Clock::now() < deadline;) {
    if (!local_done) {
      for (const auto& run : runs) {
        if (last.count(run)) continue;
        c.send_line(socket_request("get", "g", json::object{{"run_id", run}}));
        auto answer = c.wait_reply("run", 10s);
        if (answer && answer->contains("state") && answer->at("state") == "closed")
          last[run] = answer->at("last_seq").to_number<std::uint64_t>();
      }
      if (last.size() == runs.size()) {
        local_done = Clock::now();
        for (auto& [run, n] : last)
          f.lines += n;
      }
    }
    if (local_done && fleet_has_all()) break;
    std::this_thread::sleep_for(20ms);  // a poll's period, not a synchronisation
  }
  const auto t_end = Clock::now();
  f.load_after = loadavg1();
  f.fleet_s = std::chrono::duration<double>(t_end - t0).count();
  f.local_s = local_done ? std::chrono::duration<double>(*local_done - t0).count() : 0;
  f.messages = stored();
  if (!local_done || in_fleet != runs.size()) {
    std::fprintf(stderr, "fleet_bench (publish): %zu runs of %zu complete in the fleet\n", in_fleet, runs.size());
    f.failed = true;
  }
  // Every run's stream read back from JetStream, split into lines as every reader does: 1..n in
  // order (a duplicate or a gap shows as a wrong seq) and nothing after n (no duplicate of the
  // last lines).
  for (const auto& [run, n] : last) {
    auto reader = fleet::FleetStreamReader::open(**link, run, 1);
    bool ok = static_cast<bool>(reader);
    for (std::uint64_t seq = 1; ok && seq <= n; ++seq) {
      auto next = reader->next(10s);
      ok = next && *next && (*next)->seq == seq;
    }
    if (ok) {
      auto extra = reader->next(200ms);
      ok = extra && !*extra;
    }
    if (!ok) ++f.incomplete;
  }
  (void)daemon.stop(30s);
  return f;
}

// What this cluster takes at all, in the same invocation: the same lines (runs x lines, about a
// hundred bytes, each with its message id) sent by one link with no expectation and up to 1,000
// in flight, no daemon: JetStream's own ceiling here, the floor the daemons' figure is judged by.
// `fenced`: instead, each run's next line sent from its previous line's ack, expecting that ack's
// sequence (one line in flight per run, as the daemon's publishers): this design's own ceiling.
double nats_floor(const mh::test::NatsCluster& cluster, const FleetDaemonOptions& o, bool fenced) {
  fleet::FleetConfig fc;
  fc.nats_urls = {cluster.url(0)};
  fc.host_id = "floor";
  fc.prefix = fenced ? "pg" : "pf";
  fc.request_timeout = std::chrono::seconds(10);
  auto link = fleet::FleetLink::connect(fc);
  if (!link) return 0;
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0, failed = 0;
  const std::string text =
      R"({"format":"metaharness.event/1","seq":1,"event":"text","text":"a line of about a hundred bytes"})";
  const auto t0 = Clock::now();
  if (fenced) {
    // Each run's chain: line l's ack sends line l+1 (from libnats' ack thread, as it allows).
    auto chain = std::make_shared<std::function<void(int, int, std::uint64_t)>>();
    *chain = [&, weak = std::weak_ptr(chain)](int r, int l, std::uint64_t last) {
      jsPubOptions po;
      jsPubOptions_Init(&po);
      if (last == 0)
        po.ExpectNoMessage = true;
      else
        po.ExpectLastSubjectSeq = last;
      auto sent = (*link)->pipe().send((*link)->names().events_subject("g" + std::to_string(r)),
                                       "g" + std::to_string(r) + ":" + std::to_string(l), text, po,
                                       [&, weak, r, l](fleet::PublishAck ack) {
                                         auto next = weak.lock();
                                         std::lock_guard lock(mu);
                                         if (ack.status != NATS_OK || !next) {
                                           ++failed;
                                           --in_flight;
                                         } else if (l + 1 < o.publish_lines) {
                                           (*next)(r, l + 1, ack.sequence);
                                         } else {
                                           --in_flight;
                                         }
                                         cv.notify_all();
                                       });
      if (!sent) {
        ++failed;
        --in_flight;
      }
    };
    {
      std::lock_guard lock(mu);
      in_flight = o.publish_runs;
      for (int r = 0; r < o.publish_runs; ++r)
        (*chain)(r, 0, 0);
    }
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return in_flight == 0; });
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (failed > 0) std::fprintf(stderr, "fleet_bench (fenced floor): %d chains failed\n", failed);
    return static_cast<double>(o.publish_runs) * o.publish_lines / s;
  }
  for (int l = 0; l < o.publish_lines; ++l)
    for (int r = 0; r < o.publish_runs; ++r) {
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return in_flight < 1000; });
        ++in_flight;
      }
      jsPubOptions po;
      jsPubOptions_Init(&po);
      auto sent =
          (*link)->pipe().send((*link)->names().events_subject("f" + std::to_string(r)),
                               "f" + std::to_string(r) + ":" + std::to_string(l), text, po, [&](fleet::PublishAck ack) {
                                 std::lock_guard lock(mu);
                                 --in_flight;
                                 if (ack.status != NATS_OK) ++failed;
                                 cv.notify_all();
                               });
      if (!sent) {
        std::lock_guard lock(mu);
        --in_flight;
        ++failed;
      }
    }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return in_flight == 0; });
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (failed > 0) std::fprintf(stderr, "fleet_bench (publish floor): %d publishes failed\n", failed);
  return static_cast<double>(o.publish_runs) * o.publish_lines / s;
}

}  // namespace

int bench_fleet_publish(const mh::test::NatsCluster& cluster, const FleetDaemonOptions& o) {
  std::printf("publishing (issue 26 section 5): %d chatty runs on h0 x %d text lines, 3-node cluster, R3\n",
              o.publish_runs, o.publish_lines);
  int status = 0;
  const double floor = nats_floor(cluster, o, false), fenced = nats_floor(cluster, o, true);
  std::printf("%-10s %7d lines sent by one link, no expectation, <= 1000 in flight, no daemon: %8.0f lines/s\n",
              "floor", o.publish_runs * o.publish_lines, floor);
  std::printf("%-10s %7d lines sent by one link, one per run in flight, each fenced by the last ack: %8.0f lines/s\n",
              "fenced", o.publish_runs * o.publish_lines, fenced);
  struct Phase {
    const char* name;
    bool serial;
    int batch;
  };
  const Phase phases[] = {{"serial", true, 1}, {"pipelined", false, 1}, {"batched", false, o.publish_batch}};
  for (const Phase& p : phases) {
    PublishFigure f = publish_phase(cluster, o, p.serial, p.batch);
    if (f.failed) status = std::max(status, 2);
    if (f.incomplete > 0) status = std::max(status, 1);
    std::printf(
        "%-10s %7llu lines (batch %d, %llu messages): fleet complete after %6.2f s = %8.0f lines/s per host; local "
        "writing %6.2f s = %8.0f lines/s; streams complete, in order, no duplicate: %s; load %.1f -> %.1f\n",
        p.name, static_cast<unsigned long long>(f.lines), p.batch, static_cast<unsigned long long>(f.messages),
        f.fleet_s, f.fleet_s > 0 ? f.lines / f.fleet_s : 0.0, f.local_s, f.local_s > 0 ? f.lines / f.local_s : 0.0,
        f.incomplete == 0 && !f.failed ? "yes" : "NO", f.load_before, f.load_after);
  }
  return status;
}

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
