// The model gateway's added latency (issue 25): the same streamed Messages request to the scripted
// endpoint on loopback, directly and through a Gateway, interleaved request by request on kept-alive
// connections, over plain http and (with the test CA) over https to the upstream. For each: time to
// the first body byte (the first SSE event) and to the whole answer, medians and p90 side by side,
// and the gateway thread's CPU per request; first, what preparing a run's gateway costs (its TLS
// trust). A plain program; scripts/bench.sh may run it.
//   mh_gateway_bench [--requests N]   (default 400 per path)
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon/gateway/gateway.hpp"
#include "daemon/model/scripted_endpoint.hpp"
#include "testkit/stats.hpp"
#ifdef MH_GATEWAY_BENCH_TLS
#include "tests/support/test_ca.hpp"
#endif

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kScenario = R"({"format": "metaharness.scenario/1",
  "steps": [{"content": [{"type": "text", "text": "A short answer, streamed as a few deltas."}],
             "delta_bytes": 12, "sticky": true}]})";

const std::string kBody =
    R"({"model":"bench-model","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"hi"}],)"
    R"("tools":[{"name":"Bash","input_schema":{"type":"object"}}]})";

// One kept-alive client connection, plain or TLS (trusting `ca_file`); blocking, with socket
// timeouts so nothing waits forever.
class Client {
 public:
  Client(std::uint16_t port, std::string token, const std::optional<std::filesystem::path>& ca_file = std::nullopt)
      : tls_context_(asio::ssl::context::tls_client), stream_(io_, tls_context_), token_(std::move(token)) {
    tcp::socket& socket = stream_.next_layer();
    socket.connect(tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), port));
    socket.set_option(tcp::no_delay(true));
    timeval limit{10, 0};
    ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    if (ca_file) {
      tls_ = true;
      tls_context_.load_verify_file(ca_file->string());
      stream_.set_verify_mode(asio::ssl::verify_peer);
      stream_.handshake(asio::ssl::stream_base::client);
    }
  }
  std::optional<std::pair<double, double>> request() {
    return tls_ ? request_on(stream_) : request_on(stream_.next_layer());
  }

 private:
  template <class Stream>
  std::optional<std::pair<double, double>> request_on(Stream& stream) {
    http::request<http::string_body> req{http::verb::post, "/v1/messages", 11};
    req.set(http::field::host, "127.0.0.1");
    req.set("x-api-key", token_);
    req.set("anthropic-version", "2023-06-01");
    req.set(http::field::content_type, "application/json");
    req.body() = kBody;
    req.prepare_payload();
    const auto start = Clock::now();
    beast::error_code ec;
    http::write(stream, req, ec);
    if (ec) return std::nullopt;
    http::response_parser<http::string_body> parser;
    double first_byte_ms = 0;
    bool first = false;
    while (!parser.is_done()) {
      http::read_some(stream, buffer_, parser, ec);
      if (ec) return std::nullopt;
      if (!first && parser.is_header_done() && !parser.get().body().empty()) {
        first = true;
        first_byte_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      }
    }
    const double total_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (parser.get().result_int() != 200) return std::nullopt;
    return std::pair{first_byte_ms, total_ms};
  }

  asio::io_context io_;
  asio::ssl::context tls_context_;
  asio::ssl::stream<tcp::socket> stream_;
  bool tls_ = false;
  beast::flat_buffer buffer_;
  std::string token_;
};

double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

struct Row {
  std::vector<double> first_direct, first_gateway, total_direct, total_gateway;
  double gateway_cpu_ms_per_request = 0;
};

// An endpoint and a gateway in front of it, each on its own thread; `requests` of each path,
// alternating.
std::optional<Row> measure(const std::string& label, int requests, const mh::model::EndpointOptions& endpoint_options,
                           const std::optional<std::filesystem::path>& ca_file) {
  asio::io_context endpoint_io;
  auto scenario = mh::model::parse_scenario(kScenario);
  if (!scenario) return std::nullopt;
  mh::model::ScriptedEndpoint endpoint(endpoint_io, std::move(*scenario), endpoint_options);
  if (!endpoint.start()) return std::nullopt;
  std::thread endpoint_thread([&] { endpoint_io.run(); });

  asio::io_context gateway_io;
  mh::gateway::GatewayOptions options;
  options.upstream.name = "bench";
  options.upstream.url = endpoint.base_url();
  options.upstream.key = endpoint.token();
  options.upstream.ca_file = ca_file;
  options.token = mh::gateway::placeholder_token("bench");
  std::uint64_t settled = 0;
  mh::gateway::GatewayHooks hooks;
  hooks.usage = [&](const mh::gateway::RequestUsage&) { ++settled; };
  mh::gateway::Gateway gateway(gateway_io, options, hooks);
  if (auto refused = gateway.prepare()) {
    std::cerr << label << ": " << *refused << "\n";
    endpoint.stop();
    endpoint_thread.join();
    return std::nullopt;
  }
  tcp::acceptor acceptor(gateway_io, tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), 0));
  const std::uint16_t gateway_port = acceptor.local_endpoint().port();
  gateway.serve(std::move(acceptor));
  std::thread gateway_thread([&] { gateway_io.run(); });
  auto gateway_cpu = [&] {
    std::promise<double> p;
    asio::post(gateway_io, [&] { p.set_value(thread_cpu_ms()); });
    return p.get_future().get();
  };

  Row row;
  {
    // The vendor reaches the gateway over plain loopback (or its Unix socket) whatever the
    // upstream speaks; directly, it speaks the upstream's own protocol.
    Client direct(endpoint.port(), endpoint.token(), ca_file);
    Client through(gateway_port, options.token);
    for (int i = 0; i < 20; ++i) {  // warm-up: connections, TLS session, caches
      direct.request();
      through.request();
    }
    const double cpu_before = gateway_cpu();
    for (int i = 0; i < requests; ++i) {
      // Alternate which goes first, so neither always follows the other.
      for (int leg = 0; leg < 2; ++leg) {
        const bool via_gateway = (leg == 0) == (i % 2 == 0);
        auto s = via_gateway ? through.request() : direct.request();
        if (!s) {
          std::cerr << label << ": a request failed\n";
          continue;
        }
        (via_gateway ? row.first_gateway : row.first_direct).push_back(s->first);
        (via_gateway ? row.total_gateway : row.total_direct).push_back(s->second);
      }
    }
    row.gateway_cpu_ms_per_request = (gateway_cpu() - cpu_before) / requests;
  }
  gateway.stop();
  gateway_thread.join();
  endpoint.stop();
  endpoint_thread.join();
  return row;
}

void print(const std::string& label, const Row& row) {
  using mh::testkit::fixed;
  auto p = [](std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    return mh::testkit::quantile_of_sorted(v, q);
  };
  auto line = [&](const char* what, const std::vector<double>& direct, const std::vector<double>& gateway) {
    std::printf("  %-14s direct p50 %s ms p90 %s ms | gateway p50 %s ms p90 %s ms | added p50 %s ms (n=%zu)\n", what,
                fixed(p(direct, 0.5), 3).c_str(), fixed(p(direct, 0.9), 3).c_str(), fixed(p(gateway, 0.5), 3).c_str(),
                fixed(p(gateway, 0.9), 3).c_str(), fixed(p(gateway, 0.5) - p(direct, 0.5), 3).c_str(), gateway.size());
  };
  std::printf("%s\n", label.c_str());
  line("first byte", row.first_direct, row.first_gateway);
  line("whole answer", row.total_direct, row.total_gateway);
  std::printf("  gateway thread CPU per request: %s ms\n", fixed(row.gateway_cpu_ms_per_request, 3).c_str());
}

// What a run's gateway costs before its first request (Gateway::prepare: the URL, the key, the TLS
// context and its trust), the median of `times` prepares on this thread, beside what the trust
// cost before round 13: the system's whole CA bundle parsed into the context
// (SSL_CTX_set_default_verify_paths), measured here on a bare context in the same invocation.
void print_prepare_costs(int times) {
  using mh::testkit::fixed;
  auto median_ms = [&](const std::function<bool()>& once) -> std::optional<double> {
    std::vector<double> cpu;
    for (int i = 0; i < times; ++i) {
      const double before = thread_cpu_ms();
      if (!once()) return std::nullopt;
      cpu.push_back(thread_cpu_ms() - before);
    }
    std::sort(cpu.begin(), cpu.end());
    return mh::testkit::quantile_of_sorted(cpu, 0.5);
  };
  auto prepare = [](const std::string& url) {
    return [url] {
      asio::io_context io;
      mh::gateway::GatewayOptions options;
      options.upstream.name = "bench";
      options.upstream.url = url;
      options.upstream.key = "k";
      options.token = mh::gateway::placeholder_token("bench");
      mh::gateway::Gateway gateway(io, options, {});
      return !gateway.prepare().has_value();
    };
  };
  const auto plain = median_ms(prepare("http://127.0.0.1:9"));
  const auto system = median_ms(prepare("https://api.anthropic.com"));
  const auto bundle = median_ms([] {
    asio::ssl::context context(asio::ssl::context::tls_client);
    boost::system::error_code ec;
    context.set_default_verify_paths(ec);
    return !ec;
  });
  const char* bundle_env = std::getenv("SSL_CERT_FILE");
  std::printf("gateway prepare, CPU median of %d on this thread (SSL_CERT_FILE %s)\n", times,
              bundle_env ? (std::string("set: the system's trust loads that bundle whole, ") + bundle_env).c_str()
                         : "unset: the system's trust is its CA directory");
  std::printf("  plain upstream (http, loopback)             %s ms\n", plain ? fixed(*plain, 3).c_str() : "failed");
  std::printf("  TLS upstream, the system's trust            %s ms\n", system ? fixed(*system, 3).c_str() : "failed");
  std::printf("  the system's CA bundle parsed whole (before) %s ms (a bare TLS context's trust alone)\n",
              bundle ? fixed(*bundle, 3).c_str() : "failed");
}

}  // namespace

int main(int argc, char** argv) {
  int requests = 400;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--requests") requests = std::stoi(argv[i + 1]);

  print_prepare_costs(25);
  if (auto row = measure("upstream over http (loopback)", requests, {}, std::nullopt)) {
    print("upstream over http (loopback)", *row);
  } else {
    return 1;
  }
#ifdef MH_GATEWAY_BENCH_TLS
  // The upstream over https with a throwaway CA, as a real provider is reached: the gateway keeps
  // its TLS connection to the upstream alive per client connection.
  const auto dir = std::filesystem::temp_directory_path() / ("mh-gateway-bench-" + std::to_string(::getpid()));
  mh::testing::TestCa ca(dir);
  if (!ca.ok()) {
    std::cerr << "test CA: " << ca.error() << "\n";
    return 1;
  }
  mh::model::EndpointOptions tls;
  tls.tls_cert = ca.cert_file();
  tls.tls_key = ca.key_file();
  auto row = measure("upstream over https (loopback, test CA)", requests, tls, ca.ca_file());
  std::filesystem::remove_all(dir);
  if (!row) return 1;
  print("upstream over https (loopback, test CA)", *row);
#endif
  return 0;
}
