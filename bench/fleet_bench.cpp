// The fleet's numbers (issue 13), on a real 3-node nats-server cluster (JetStream, loopback,
// started and stopped here) with three hosts' links (mh_fleet), each on its own node:
//   submit -> placed       a spec published on one host until a host has won its record
//   event fleet-wide       a line published by its owner until another host's ordered consumer has it
//   decision round trip    a command relayed to another host and answered, beside the same
//                          handler reached locally (a post to its executor and back)
//   placement throughput   N specs queued at once, three hosts pulling: runs placed per second
// Then the same through three real daemons (fleet_daemon_bench.hpp).
// A plain program: mh_fleet_bench [--runs N] [--lines N] [--decisions N] [--library-only]
// [--publish-only] [--publish-runs N] [--publish-lines N] [--publish-batch N] (publishing:
// fleet_daemon_bench.hpp).
#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "bench/fleet_daemon_bench.hpp"
#include "daemon/fleet/command_relay.hpp"
#include "daemon/fleet/event_publisher.hpp"
#include "daemon/fleet/fleet_reader.hpp"
#include "daemon/fleet/placement.hpp"
#include "daemon/fleet/run_records.hpp"
#include "tests/standin/standin_identity.hpp"
#include "tests/support/nats_cluster.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using mh::fleet::FleetLink;

double us(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

using mh::bench::report_us;

std::unique_ptr<FleetLink> link(const mh::test::NatsCluster& cluster, int node, const std::string& host,
                                const std::string& prefix) {
  mh::fleet::FleetConfig c;
  c.nats_urls = {cluster.url(node)};
  c.host_id = host;
  c.replicas = 3;
  c.prefix = prefix;
  c.request_timeout = std::chrono::seconds(20);
  auto made = FleetLink::connect(c);
  if (!made) {
    std::fprintf(stderr, "fleet_bench: %s\n", made.error().text.c_str());
    std::exit(2);
  }
  return std::move(*made);
}

// Three hosts pull until `total` runs are placed; returns when they are.
void place_all(std::vector<std::unique_ptr<FleetLink>>& hosts, int total, int batch,
               std::map<std::string, Clock::time_point>* placed_at) {
  std::mutex mutex;
  std::atomic<int> placed{0};
  std::vector<std::thread> threads;
  for (int h = 0; h < 3; ++h)
    threads.emplace_back([&, h] {
      auto& host = *hosts[h];
      auto puller = mh::fleet::PlacementPuller::open(host);
      if (!puller) return;
      const std::string name = "h" + std::to_string(h);
      while (placed.load() < total) {
        auto offers = puller->fetch(batch, std::chrono::milliseconds(200));
        if (!offers) continue;
        for (auto& offer : *offers) {
          auto claim = mh::fleet::claim_placement(host, offer.run_id(), name);
          if (claim && *claim == mh::fleet::Claim::won) {
            if (placed_at) {
              std::lock_guard lock(mutex);
              (*placed_at)[offer.run_id()] = Clock::now();
            }
            ++placed;
          }
          (void)offer.ack();
        }
      }
    });
  for (auto& t : threads)
    t.join();
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 300, lines = 2000, decisions = 1000;
  bool library_only = false, publish_only = false;
  int publish_runs = 50, publish_lines = 1000, publish_batch = 64;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--library-only")) library_only = true;
    if (!std::strcmp(argv[i], "--publish-only")) publish_only = true;
    if (i + 1 >= argc) continue;
    if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--lines")) lines = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--decisions")) decisions = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--publish-runs")) publish_runs = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--publish-lines")) publish_lines = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--publish-batch")) publish_batch = std::atoi(argv[i + 1]);
  }
  auto dir = std::filesystem::temp_directory_path() / ("mh-fleet-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  int status = 0;
  {
    mh::test::NatsCluster cluster(dir);
    if (!cluster.ready()) {
      std::fprintf(stderr, "fleet_bench: the cluster did not become ready: %s\n", cluster.why().c_str());
      return 2;
    }
    std::printf("fleet_bench: 3-node nats-server %s cluster, R3 streams, %u CPUs\n", "2.9",
                std::thread::hardware_concurrency());
    const auto bin = std::filesystem::canonical("/proc/self/exe").parent_path();
    mh::bench::FleetDaemonOptions o;
    o.metaharness = bin / "metaharness";
    o.standin = bin / mh::standin::kProgram;
    o.work_dir = dir / "daemons";
    o.publish_runs = publish_runs;
    o.publish_lines = publish_lines;
    o.publish_batch = publish_batch;
    if (publish_only) {
      status = mh::bench::bench_fleet_publish(cluster, o);
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      return status;
    }
    std::vector<std::unique_ptr<FleetLink>> hosts;
    for (int h = 0; h < 3; ++h)
      hosts.push_back(link(cluster, h, "h" + std::to_string(h), "b"));

    // submit -> placed, one at a time (nothing queued ahead of it).
    {
      std::map<std::string, Clock::time_point> sent, placed;
      std::thread pullers([&] { place_all(hosts, runs, 1, &placed); });
      for (int i = 0; i < runs; ++i) {
        std::string id = "lat" + std::to_string(i);
        sent[id] = Clock::now();
        (void)mh::fleet::submit_spec(*hosts[0], id, R"({"run":{}})");
        // The next submit once this one is placed: latency, not queueing.
        while (true) {
          std::this_thread::sleep_for(std::chrono::microseconds(50));
          auto record = mh::fleet::read_run_record(*hosts[0], id);
          if (record && *record) break;
        }
      }
      pullers.join();
      std::vector<double> v;
      for (auto& [id, t] : sent)
        if (placed.count(id)) v.push_back(us(placed[id] - t));
      report_us("submit -> placed (record won)", v);
    }
    // An event line fleet-wide: published by h0, delivered to h1's ordered consumer.
    {
      boost::asio::io_context io;
      auto work = boost::asio::make_work_guard(io);
      std::thread io_thread([&] { io.run(); });
      std::vector<Clock::time_point> sent(static_cast<std::size_t>(lines) + 1);
      std::vector<double> v;
      std::promise<void> all;
      int seen = 0;
      auto on_line = [&](mh::fleet::FleetLine line) {
        if (line.seq >= 1 && line.seq <= static_cast<std::uint64_t>(lines))
          v.push_back(us(Clock::now() - sent[line.seq]));
        if (++seen == lines) all.set_value();
      };
      auto follower = mh::fleet::FleetStreamFollower::open(*hosts[1], "ev1", 1, io.get_executor(), on_line);
      auto publisher = mh::fleet::RunPublisher::resume(*hosts[0], "ev1");
      for (int seq = 1; seq <= lines; ++seq) {
        std::string line =
            R"({"format":"metaharness.event/1","seq":)" + std::to_string(seq) +
            R"(,"run":"ev1","event":"text","text":"a line of about a hundred bytes, as a model's text often is."})";
        sent[static_cast<std::size_t>(seq)] = Clock::now();
        (void)publisher->publish(static_cast<std::uint64_t>(seq), line);
      }
      all.get_future().wait_for(std::chrono::seconds(60));
      follower->reset();
      work.reset();
      io_thread.join();
      report_us("event: owner's publish -> other host has it", v);
    }
    // A decision round trip: relayed to another host, beside the same handler reached locally.
    {
      boost::asio::io_context io;
      auto work = boost::asio::make_work_guard(io);
      std::thread io_thread([&] { io.run(); });
      auto handler = [](std::string body, mh::fleet::Responder responder) { responder.respond(body); };
      auto server = mh::fleet::CommandServer::open(*hosts[1], hosts[1]->names().command_subject("h1"),
                                                   io.get_executor(), handler);
      std::vector<double> remote, local;
      const std::string body =
          R"({"kind":"command","run_id":"r","request":{"command":{"format":"metaharness.command/1","id":"c","command":"tool.decide","call_id":"toolu_x","decision":"allow"}}})";
      int failed = 0;
      for (int i = 0; i < decisions; ++i) {
        auto t0 = Clock::now();
        auto answer = mh::fleet::relay_request(*hosts[0], hosts[0]->names().command_subject("h1"), body,
                                               std::chrono::seconds(10));
        if (!answer || *answer != body) {  // a failed relay is said, never timed as a decision
          ++failed;
          continue;
        }
        remote.push_back(us(Clock::now() - t0));
        auto t1 = Clock::now();
        std::promise<void> answered;
        boost::asio::post(io, [&] { answered.set_value(); });
        answered.get_future().wait();
        local.push_back(us(Clock::now() - t1));
      }
      server->reset();
      work.reset();
      io_thread.join();
      if (failed > 0) {
        std::fprintf(stderr, "fleet_bench: %d of %d relayed decisions failed\n", failed, decisions);
        status = 2;
      }
      report_us("decision relayed to another host (round trip)", remote);
      report_us("the same handler reached locally (post+back)", local);
    }
    // Placement throughput: every spec queued first, then three hosts pulling in batches.
    {
      for (int i = 0; i < runs; ++i)
        (void)mh::fleet::submit_spec(*hosts[0], "tp" + std::to_string(i), R"({"run":{}})");
      auto t0 = Clock::now();
      place_all(hosts, runs, 16, nullptr);
      double s = std::chrono::duration<double>(Clock::now() - t0).count();
      std::printf("%-44s %d runs in %.2f s: %.0f runs/s\n", "placement throughput, 3 hosts", runs, s, runs / s);
    }
    // The same figures through three real daemons (metaharness and the stand-in next to this
    // program), unless asked for the library's alone.
    if (!library_only && std::filesystem::exists(o.metaharness) && std::filesystem::exists(o.standin))
      status =
          std::max({status, mh::bench::bench_fleet_daemons(cluster, o), mh::bench::bench_fleet_publish(cluster, o)});
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return status;
}
