// `metaharness model serve`: our own binary as a process. It announces where it listens on one
// stdout line, serves until SIGTERM and exits 0; a bad scenario is refused with exit 2.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <csignal>
#include <fstream>

#include "tests/model/process_support.hpp"
#include "tests/model/test_support.hpp"
#include "tests/support/test_ca.hpp"

namespace mh::model::testing {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;

const fs::path kMetaharness = MH_METAHARNESS_BIN;
const fs::path kScenarios = fs::path(MH_SOURCE_DIR) / "tests/scenarios/model";

TEST(ServeVerb, AnnouncesServesAndExitsZeroOnSigterm) {
  TempDir dir("serve-verb");
  ProcessSpec spec;
  spec.executable = kMetaharness;
  spec.args = {"model",   "serve",         "--scenario", (kScenarios / "two_wires_shell.json").string(),
               "--token", "sk-serve-test", "--log",      (dir / "requests.jsonl").string()};
  spec.environment = {"PATH=/usr/bin:/bin"};
  spec.working_dir = dir.path();
  spec.output_dir = dir.path();
  LiveProcess serve(spec);

  const auto line = serve.read_line(10s);
  ASSERT_TRUE(line.has_value()) << serve.stderr_text();
  const json::value announced = parse(*line);
  const auto port = announced.at("port").to_number<std::uint16_t>();
  EXPECT_EQ(announced.at("base_url").as_string(), "http://127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(announced.at("openai_base_url").as_string(), "http://127.0.0.1:" + std::to_string(port) + "/v1");
  EXPECT_EQ(announced.at("token"), "sk-serve-test");

  const Response claude =
      exchange(port, "POST", "/v1/messages", anthropic_headers("sk-serve-test"), anthropic_body(false));
  ASSERT_EQ(claude.status, 200u) << claude.error;
  EXPECT_EQ(parse(claude.body).at("content").at(1).at("name"), "Bash");
  const Response codex =
      exchange(port, "POST", "/v1/responses", openai_headers("sk-serve-test"), responses_body(false));
  ASSERT_EQ(codex.status, 200u) << codex.error;
  EXPECT_EQ(parse(codex.body).at("output").at(0).at("content").at(0).at("text"), "It printed hi.");

  serve.signal(SIGTERM);
  const auto code = serve.wait(10s);
  ASSERT_TRUE(code.has_value()) << "serve did not exit on SIGTERM";
  EXPECT_EQ(*code, 0);
  EXPECT_NE(serve.stderr_text().find("stopped after 2 request(s)"), std::string::npos) << serve.stderr_text();

  // Two requests, each with a request and an end record.
  const std::string log = read_file(dir / "requests.jsonl");
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 4);
  EXPECT_EQ(log.find("sk-serve-test"), std::string::npos);
}

// One HTTPS exchange trusting `ca_file` and checking the name 127.0.0.1; blocking, every wait
// bounded by socket timeouts. The status, or 0 and the error.
std::pair<unsigned, std::string> https_post(std::uint16_t port, const fs::path& ca_file, const std::string& token) {
  namespace asio = boost::asio;
  namespace http = boost::beast::http;
  asio::io_context io;
  asio::ssl::context context(asio::ssl::context::tls_client);
  context.load_verify_file(ca_file.string());
  asio::ssl::stream<asio::ip::tcp::socket> stream(io, context);
  boost::system::error_code ec;
  stream.next_layer().connect({asio::ip::make_address_v4("127.0.0.1"), port}, ec);
  if (ec) return {0, ec.message()};
  timeval limit{10, 0};
  ::setsockopt(stream.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  ::setsockopt(stream.next_layer().native_handle(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  stream.set_verify_mode(asio::ssl::verify_peer);
  stream.set_verify_callback(asio::ssl::host_name_verification("127.0.0.1"));
  stream.handshake(asio::ssl::stream_base::client, ec);
  if (ec) return {0, "handshake: " + ec.message()};
  http::request<http::string_body> request{http::verb::post, "/v1/messages", 11};
  request.set(http::field::host, "127.0.0.1");
  request.set("x-api-key", token);
  request.set(http::field::content_type, "application/json");
  request.body() = anthropic_body(false);
  request.prepare_payload();
  http::write(stream, request, ec);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> response;
  if (!ec) http::read(stream, buffer, response, ec);
  if (ec) return {0, ec.message()};
  return {response.result_int(), response.body()};
}

TEST(ServeVerb, ServesHttpsWithTheCertificateItIsGiven) {
  TempDir dir("serve-tls");
  mh::testing::TestCa ca(dir / "ca");
  ASSERT_TRUE(ca.ok()) << ca.error();
  ProcessSpec spec;
  spec.executable = kMetaharness;
  spec.args = {"model",      "serve",
               "--scenario", (kScenarios / "claude_text.json").string(),
               "--token",    "sk-tls-test",
               "--tls-cert", ca.cert_file().string(),
               "--tls-key",  ca.key_file().string()};
  spec.environment = {"PATH=/usr/bin:/bin"};
  spec.working_dir = dir.path();
  spec.output_dir = dir.path();
  LiveProcess serve(spec);
  const auto line = serve.read_line(10s);
  ASSERT_TRUE(line.has_value()) << serve.stderr_text();
  const json::value announced = parse(*line);
  const auto port = announced.at("port").to_number<std::uint16_t>();
  EXPECT_EQ(announced.at("base_url").as_string(), "https://127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(announced.at("openai_base_url").as_string(), "https://127.0.0.1:" + std::to_string(port) + "/v1");

  const auto [status, body] = https_post(port, ca.ca_file(), "sk-tls-test");
  EXPECT_EQ(status, 200u) << body;
  EXPECT_EQ(parse(body).at("content").at(0).at("text"), "Hello from the scripted model.");
  // Another CA's client does not trust it.
  mh::testing::TestCa other(dir / "other-ca");
  ASSERT_TRUE(other.ok()) << other.error();
  EXPECT_EQ(https_post(port, other.ca_file(), "sk-tls-test").first, 0u);
  // Plain HTTP to a TLS port gets no answer.
  EXPECT_EQ(exchange(port, "POST", "/v1/messages", anthropic_headers("sk-tls-test"), anthropic_body(false), 5s).status,
            0u);

  serve.signal(SIGTERM);
  const auto code = serve.wait(10s);
  ASSERT_TRUE(code.has_value()) << "serve did not exit on SIGTERM";
  EXPECT_EQ(*code, 0);
}

TEST(ServeVerb, RefusesACertificateWithoutItsKey) {
  TempDir dir("serve-tls-half");
  mh::testing::TestCa ca(dir / "ca");
  ASSERT_TRUE(ca.ok()) << ca.error();
  ProcessSpec spec;
  spec.executable = kMetaharness;
  spec.args = {"model",      "serve",
               "--scenario", (kScenarios / "claude_text.json").string(),
               "--tls-cert", ca.cert_file().string()};
  spec.environment = {"PATH=/usr/bin:/bin"};
  spec.working_dir = dir.path();
  spec.output_dir = dir.path();
  const ProcessResult run = run_process(spec, 10s);
  ASSERT_TRUE(run.finished);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_TRUE(run.out.empty()) << run.out;
  EXPECT_NE(run.err.find("--tls-key"), std::string::npos) << run.err;
}

TEST(ServeVerb, RefusesABadScenarioNamingTheKey) {
  TempDir dir("serve-refusal");
  std::ofstream(dir / "bad.json") << R"({"format": "metaharness.scenario/1",
    "steps": [{"content": [{"type": "tool_call", "name": "Bash", "input": "ls"}]}]})";
  ProcessSpec spec;
  spec.executable = kMetaharness;
  spec.args = {"model", "serve", "--scenario", (dir / "bad.json").string()};
  spec.environment = {"PATH=/usr/bin:/bin"};
  spec.working_dir = dir.path();
  spec.output_dir = dir.path();
  const ProcessResult run = run_process(spec, 10s);
  ASSERT_TRUE(run.finished);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(run.out.empty()) << run.out;
  EXPECT_NE(run.err.find("steps[0].content[0].input"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("must be a JSON object"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace mh::model::testing
