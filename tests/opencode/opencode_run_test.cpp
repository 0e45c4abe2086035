// Governed opencode runs end to end, against the REAL CLI (opencode-ai 1.18.33, `opencode acp`,
// installed by ./run setup) and the project's scripted endpoint on the Anthropic wire. The
// behaviours every vendor shares run from tests/support/shared_behaviours.hpp (Opencode.*), with
// what only opencode's records show as its extras; the tests here (OpencodeRun.*) are what only
// this adapter has: the seam plugin and how it fails closed, and ACP's turn per prompt.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "adapters/adapter.hpp"
#include "adapters/opencode/opencode_plugin.hpp"
#include "adapters/registry.hpp"
#include "protocol/completeness.hpp"
#include "protocol/digest.hpp"
#include "protocol/frame.hpp"
#include "tests/support/governed_run.hpp"
#include "tests/support/run_sockets.hpp"
#include "tests/support/shared_behaviours.hpp"

namespace mh::test {
namespace {

namespace fs = std::filesystem;

class OpencodeRun : public GovernedRun {
 protected:
  OpencodeRun() : GovernedRun("opencode") {}
};

class OpencodeVendor : public VendorBase<OpencodeRun> {
 public:
  // Marked while a tool runs: opencode, the shell of its bash tool, that shell's sleep and the
  // setsid'd sleep.
  static inline const VendorFacts facts{
      .adapter = "opencode", .one_shell_call = "marker", .auth_expired_words = "OAuth token has expired."};

 protected:
  // The seam is the plugin, which saw the model's own input; the ACP permission never asked.
  void expect_frame_denial_extras() {
    expect_first_call("hook", "bash", "the plugin's tool.execute.before is the seam");
    EXPECT_EQ(read_file(run_dir() / "vendor-stdout.jsonl").find("session/request_permission"), std::string::npos)
        << "a denied call reaches no second gate";
  }
  // The command's exit code comes back on tool.result, and the ACP permission that followed the
  // allow was answered once, never always.
  void expect_allow_extras(const EventLine& requested) {
    EXPECT_EQ(requested.object.at("input").as_object().at("command"), "touch marker.txt");
    auto results = process->events_named("tool.result");
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].object.at("exit_code").to_number<int>(), 0);
    std::string stdin_log = read_file(run_dir() / "vendor-stdin.jsonl");
    EXPECT_NE(stdin_log.find(R"("optionId":"once")"), std::string::npos);
    EXPECT_EQ(stdin_log.find(R"("optionId":"always")"), std::string::npos);
  }
  // The plugin throws the reason: the model reads it verbatim as the tool's error result.
  void expect_deny_reason_delivered(const std::string& reason, std::size_t requests_before) {
    bool delivered = false;
    auto bodies = logged_request_bodies(run_dir());
    for (std::size_t i = requests_before; i < bodies.size(); ++i)
      for (const auto& m : bodies[i].at("messages").as_array())
        if (m.at("content").is_array())
          for (const auto& block : m.at("content").as_array())
            if (block.as_object().contains("tool_use_id") && block.at("tool_use_id") == "toolu_marker" &&
                protocol::canonical_json(block.at("content")).find(reason) != std::string::npos &&
                block.as_object().contains("is_error") && block.at("is_error") == true)
              delivered = true;
    EXPECT_TRUE(delivered) << "the next model request must carry the reason as the tool's error result";
  }
  void expect_interrupt_extras(const EventLine& turn_ended) { EXPECT_EQ(turn_ended.str("stop_reason"), "cancelled"); }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Opencode, SharedRun, OpencodeVendor);
INSTANTIATE_TYPED_TEST_SUITE_P(Opencode, ReplaceRun, OpencodeVendor);

// Inject between turns: with the run held open, a message is the next session/prompt, a turn of
// its own, and the model sees it.
TEST_F(OpencodeRun, InjectBetweenTurnsIsTheNextPromptAndTheModelSeesIt) {
  start("two_turns", {"--keep-open"});
  expect_injected_message_is_the_next_turn("end_turn", [](const std::vector<EventLine>& events) {
    std::vector<std::string> texts;
    for (const auto& t : events)
      texts.push_back(t.str("text"));
    EXPECT_EQ(texts, (std::vector<std::string>{"First answer.", "Second answer."}));
  });
}

// A frame.set sent mid-run, once the first call is decided, judges the next call: the new frame is
// in force from the next turn boundary (shown to the model first), so the second turn's bash call
// is denied by it, by the frame and with its reason, at the seam plugin, and never runs; the first
// call, decided under the launch frame, ran.
TEST_F(OpencodeRun, AFrameSetMidRunJudgesTheNextCallByTheNewFrame) {
  protocol::Frame launch = sealed_test_frame({protocol::OpKind::shell}, protocol::StepRef{"tests", "implement", 1, 1});
  protocol::Frame no_shell =
      sealed_test_frame({protocol::OpKind::file_read}, protocol::StepRef{"tests", "verify", 2, 1});
  const fs::path launch_file = dir.path() / "launch-frame.json";
  std::ofstream(launch_file) << protocol::frame_document(launch);
  start("call_per_turn", {"--frame", launch_file.string(), "--keep-open"});

  auto first = process->wait_for_event("tool.decided");
  ASSERT_TRUE(first) << process->stderr_text();
  EXPECT_EQ(first->str("call_id"), "toolu_first");
  EXPECT_EQ(first->str("decided_by"), "frame");
  EXPECT_EQ(first->object.at("decision").as_object().at("decision"), "allow");
  send("f1", R"({"format":"metaharness.command/1","id":"f1","command":"frame.set","frame":)" +
                 protocol::canonical_json(protocol::frame_to_json(no_shell, true)) +
                 R"(,"step_outcome":{"outcome":"completed"}})");
  EXPECT_EQ(result_code("f1"), "ok");
  ASSERT_TRUE(process->wait_for_event("turn.ended")) << process->stderr_text();
  send("m1", command_line("m1", "message.inject", R"("text":"go on")"));
  auto second = process->wait_for(
      [](const EventLine& e) { return e.event() == "tool.decided" && e.str("call_id") == "toolu_second"; });
  ASSERT_TRUE(second) << process->stderr_text();
  EXPECT_EQ(second->str("decided_by"), "frame");
  EXPECT_EQ(second->str("seam"), "hook") << "the seam plugin carried the new frame's deny";
  const auto& decision = second->object.at("decision").as_object();
  EXPECT_EQ(decision.at("decision"), "deny");
  EXPECT_EQ(
      std::string(decision.at("reason").as_string()).rfind(R"(this step admits ["file.read"] and bash is shell)", 0),
      0u)
      << second->raw;
  ASSERT_TRUE(process->wait_for([](const EventLine& e) {
    return e.event() == "turn.ended" && e.object.at("turn").to_number<int>() == 2;
  })) << process->stderr_text();
  EXPECT_EQ(finish(), 0) << process->stderr_text();

  EXPECT_TRUE(fs::exists(work() / "first.txt")) << "the call the launch frame admitted ran";
  EXPECT_FALSE(fs::exists(work() / "second.txt")) << "the call the new frame refuses never ran";
  // The new frame entered its step (and was shown to the model) before the call it judged.
  auto entered = process->events_named("step.entered");
  ASSERT_EQ(entered.size(), 2u);
  EXPECT_EQ(entered[1].str("frame_digest"), no_shell.digest);
  EXPECT_LT(entered[1].object.at("seq").to_number<std::uint64_t>(),
            second->object.at("seq").to_number<std::uint64_t>());
  EXPECT_GT(entered[1].object.at("seq").to_number<std::uint64_t>(), first->object.at("seq").to_number<std::uint64_t>());
  EXPECT_TRUE(a_later_request_carries("and bash is shell, which it does not")) << "the model reads the new frame's no";
}

// Steer has no ACP tier, and no posture maps truthfully: a run that needs either is refused
// before anything spawns, by name.
TEST_F(OpencodeRun, ARunThatNeedsSteerOrPermissionSetIsRefusedBeforeAnythingSpawns) {
  start("marker", {"--require", "steer", "--require", "permission.set"});
  process->close_stdin();
  EXPECT_EQ(finish(), 2);
  std::set<std::string> refused;
  for (const auto& r : process->events_named("command.result")) {
    EXPECT_EQ(outcome_code(r), "UNSUPPORTED_CONTROL") << r.raw;
    refused.insert(r.str("id"));
  }
  EXPECT_EQ(refused, (std::set<std::string>{"start/steer", "start/permission.set"}));
  EXPECT_FALSE(fs::exists(run_dir() / "vendor-stdout.jsonl")) << "nothing was spawned";
}

// What the reader does not map becomes opaque, citing the exact line: opencode's
// available_commands_update has no event of its own.
TEST_F(OpencodeRun, AnUnmappedUpdateBecomesOpaqueWithItsDigestAndLine) {
  start("two_turns");
  process->close_stdin();
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  auto kinds = opaque_kinds_citing_their_lines("vendor_subtype");
  EXPECT_TRUE(kinds.count("available_commands_update")) << "available_commands_update has no event of its own";
}

// No path to the network but the model endpoint: while a run makes a tool call, every socket
// opencode holds is connected to loopback (or to nothing), and the endpoint served every model
// request of the run (none went to a hosted default).
TEST_F(OpencodeRun, NoSocketOfTheRunReachesBeyondLoopback) {
  start("marker", {"--decisions", "ask"});
  auto requested = process->wait_for_event("tool.requested");
  ASSERT_TRUE(requested) << process->stderr_text();
  std::string id = run_id();
  std::vector<int> marked = processes_with_env("METAHARNESS_RUN=" + id);
  ASSERT_FALSE(marked.empty());
  std::set<std::string> remotes;
  for (int pid : marked)
    for (const auto& r : remote_addresses(pid))
      remotes.insert(r);
  EXPECT_FALSE(remotes.empty()) << "opencode holds its connection to the endpoint";
  for (const auto& r : remotes)
    EXPECT_TRUE(is_loopback_or_unconnected(r)) << "a socket reaches " << r;
  send("c1", decide_line("c1", "toolu_marker", R"({"decision":"allow"})"));
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_GE(logged_request_bodies(run_dir()).size(), 2u) << "the model requests came to the scripted endpoint";
}

// opencode's webfetch fetches from opencode's own process when a call of it is allowed, as Claude's
// WebFetch does: nothing at launch isolates the network (the attestation says so), so whether it
// reaches a page is the controller's decision, here a frame's. The model asks for a page of the
// test's own, on loopback (fetch_then_answer.json, its URL pointed there).
class OpencodeFetch : public OpencodeRun {
 protected:
  static constexpr std::string_view kPage = "the words of the page the test serves";

  void SetUp() override {
    listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    ASSERT_GE(listener, 0) << std::strerror(errno);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof sa;
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&sa), length), 0) << std::strerror(errno);
    ASSERT_EQ(::listen(listener, 8), 0);
    ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&sa), &length), 0);
    url = "http://127.0.0.1:" + std::to_string(ntohs(sa.sin_port)) + "/page";
    std::string text = read_file(scenario("fetch_then_answer"));
    const std::string placeholder = "http://127.0.0.1:9/nothing-listens";
    auto at = text.find(placeholder);
    ASSERT_NE(at, std::string::npos) << "the scenario names the URL this test replaces";
    text.replace(at, placeholder.size(), url);
    scenario_file = dir.path() / "fetch_then_answer.json";
    std::ofstream(scenario_file) << text;
  }
  void TearDown() override {
    if (server.joinable()) {
      ::shutdown(listener, SHUT_RDWR);
      server.join();
    }
    if (listener >= 0) ::close(listener);
    OpencodeRun::TearDown();
  }

  // Serves the page once, to the first connection within the bound, keeping its request.
  void serve_the_page() {
    server = std::thread([this] {
      pollfd p{listener, POLLIN, 0};
      if (::poll(&p, 1, 120'000) != 1) return;
      int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      char buf[4096];
      for (ssize_t n; request.find("\r\n\r\n") == std::string::npos && (n = ::read(c, buf, sizeof buf)) > 0;)
        request.append(buf, static_cast<std::size_t>(n));
      std::string answer =
          "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(kPage.size()) +
          "\r\nConnection: close\r\n\r\n" + std::string(kPage);
      (void)::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
      ::close(c);
    });
  }

  // The one decision of the run, by the frame, on the webfetch call for the test's page.
  std::string frame_decision() {
    auto requested = process->events_named("tool.requested");
    auto decided = process->events_named("tool.decided");
    EXPECT_EQ(requested.size(), 1u);
    EXPECT_EQ(decided.size(), 1u);
    if (requested.size() != 1 || decided.size() != 1) return "";
    EXPECT_EQ(requested[0].str("name"), "webfetch");
    EXPECT_EQ(requested[0].object.at("input").as_object().at("url"), json::value(url));
    EXPECT_EQ(decided[0].str("decided_by"), "frame");
    return std::string(decided[0].object.at("decision").as_object().at("decision").as_string());
  }

  int listener = -1;
  std::string url;
  std::filesystem::path scenario_file;
  std::thread server;
  std::string request;  // what the page's one connection asked, written by `server`
};

TEST_F(OpencodeFetch, AWebfetchTheFrameAdmitsReachesThePage) {
  serve_the_page();
  start_with(scenario_file, {"--frame", write_frame({protocol::OpKind::web_read}).string()});
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_EQ(frame_decision(), "allow");
  server.join();
  EXPECT_EQ(request.rfind("GET /page ", 0), 0u) << "opencode itself fetched the page: " << request;
  EXPECT_TRUE(a_later_request_carries(std::string(kPage))) << "the model read the page";
}

TEST_F(OpencodeFetch, AWebfetchAFrameWithoutWebReadDeniesFetchesNothing) {
  start_with(scenario_file, {"--frame", write_frame({protocol::OpKind::shell}).string()});
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_EQ(frame_decision(), "deny");
  // The run is over: a fetch would have connected by now. The listener never had a connection.
  int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  EXPECT_LT(c, 0) << "something connected to the page's port";
  EXPECT_EQ(errno, EAGAIN) << std::strerror(errno);
  if (c >= 0) ::close(c);
  EXPECT_FALSE(a_later_request_carries(std::string(kPage)));
}

// opencode launched exactly as a run's plan launches it, but with its hook channel at `hook_address`
// (served by the test, or by nobody; nullopt: no channel named at all) and, when given, its own
// `deadline_s` for the plugin's wait, driven through one prompt over ACP by the test itself: what
// the seam plugin does on its own when the run cannot answer it.
struct BarePluginRun {
  TempDir dir{"opencode-plugin"};
  std::filesystem::path log = dir.path() / "requests.jsonl";
  std::filesystem::path work;
  std::string transcript;  // opencode's stdout
  bool prompt_answered = false;

  void run(const std::string& scenario_name, const std::optional<std::string>& hook_address,
           const std::optional<std::string>& deadline_s = std::nullopt) {
    auto scenario = source_dir() / "tests/scenarios/opencode" / (scenario_name + ".json");
    CliProcess endpoint(
        {metaharness_binary().string(), "model", "serve", "--scenario", scenario.string(), "--log", log.string()});
    auto served = endpoint.next_line(30s);
    ASSERT_TRUE(served) << endpoint.stderr_text();
    auto address = protocol::parse_json(*served);
    ASSERT_TRUE(address && address->is_object());

    adapters::RunSpec spec;
    spec.run_id = "bare-plugin-" + std::to_string(::getpid());
    spec.adapter = "opencode";
    spec.prompt = "go";
    spec.model = "scripted";
    spec.model_endpoint = adapters::ModelEndpoint{std::string(address->at("base_url").as_string()),
                                                  std::string(address->at("token").as_string())};
    adapters::AdapterRegistry registry(adapters::host_config_from_environment());
    auto planned = registry.find("opencode")->plan(spec, {dir.path() / "run", dir.path() / "run/scratch"});
    ASSERT_TRUE(std::holds_alternative<adapters::LaunchPlan>(planned))
        << std::get<adapters::LaunchRefusal>(planned).message;
    const auto& plan = std::get<adapters::LaunchPlan>(planned);
    for (const auto& d : plan.directories)
      fs::create_directories(d);
    for (const auto& f : plan.files)
      std::ofstream(f.path) << f.contents;
    for (const auto& l : plan.links)
      fs::create_symlink(l.target, l.path);
    std::vector<std::string> env;
    for (const auto& [name, value] : plan.env) {
      if (name == adapters::opencode::kHookSocketEnv) {
        if (hook_address) env.push_back(name + "=" + *hook_address);
      } else if (name == adapters::opencode::kHookDeadlineEnv && deadline_s) {
        env.push_back(name + "=" + *deadline_s);
      } else {
        env.push_back(name + "=" + value);
      }
    }
    std::vector<std::string> argv = {plan.program.string()};
    argv.insert(argv.end(), plan.args.begin(), plan.args.end());
    work = plan.cwd;
    CliProcess opencode(argv, env, plan.cwd);
    auto answer = [&](int id) -> std::optional<EventLine> {
      return opencode.wait_for(
          [&](const EventLine& e) {
            if (e.object.contains("method") && e.object.contains("id"))  // a request of the agent's: refuse it
              opencode.send(R"({"jsonrpc":"2.0","id":)" + protocol::canonical_json(e.object.at("id")) +
                            R"(,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}})");
            return !e.object.contains("method") && e.object.contains("id") && e.object.at("id") == id;
          },
          120s);
    };
    opencode.send(
        R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false},"clientInfo":{"name":"test","version":"0"}}})");
    ASSERT_TRUE(answer(1)) << opencode.stderr_text();
    opencode.send(R"({"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":")" + plan.cwd.string() +
                  R"(","mcpServers":[]}})");
    auto session = answer(2);
    ASSERT_TRUE(session) << opencode.stderr_text();
    std::string session_id(session->object.at("result").at("sessionId").as_string());
    opencode.send(R"({"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":")" + session_id +
                  R"(","prompt":[{"type":"text","text":"go"}]}})");
    prompt_answered = answer(3).has_value();
    opencode.close_stdin();
    for (const auto& e : opencode.events())
      transcript += e.raw + "\n";
  }

  // The error result the model was given for `call`, from the endpoint's request log.
  std::string tool_error(const std::string& call) const {
    for (const auto& line : read_lines(log)) {
      auto v = protocol::parse_json(line);
      if (!v || !v->is_object() || !v->as_object().contains("body")) continue;
      const auto& body = v->as_object().at("body");
      if (!body.is_object() || !body.as_object().contains("messages")) continue;
      for (const auto& m : body.at("messages").as_array())
        if (m.at("content").is_array())
          for (const auto& block : m.at("content").as_array())
            if (block.as_object().contains("tool_use_id") && block.at("tool_use_id") == json::value(call) &&
                block.as_object().contains("is_error") && block.at("is_error") == true)
              return protocol::canonical_json(block.at("content"));
    }
    return "";
  }
  // The marker call was denied by the plugin itself, the model reading `why`: nothing ran, and
  // the call never reached opencode's second gate.
  void expect_marker_denied_by_the_plugin(const std::string& why) const {
    ASSERT_TRUE(prompt_answered);
    EXPECT_FALSE(fs::exists(work / "marker.txt")) << "the call must not have run";
    EXPECT_NE(tool_error("toolu_marker").find("metaharness could not decide this call, so it is denied: " + why),
              std::string::npos)
        << "the model reads why the plugin denied the call: " << tool_error("toolu_marker");
    EXPECT_EQ(transcript.find("session/request_permission"), std::string::npos)
        << "the call never reached the second gate";
  }
};

// A listening socket at the abstract address `@name` (what a run's hook channel is), or -1.
int listen_abstract(const std::string& name) {
  int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return -1;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path + 1, name.data(), name.size());
  auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::bind(listener, reinterpret_cast<sockaddr*>(&sa), length) != 0 || ::listen(listener, 8) != 0) {
    ::close(listener);
    return -1;
  }
  return listener;
}

// The plugin fails closed: with its hook channel unreachable (an address nobody serves), the call
// is denied by the plugin itself, the model reading why; nothing ran.
TEST(OpencodePlugin, FailsClosedWhenTheRunIsUnreachable) {
  BarePluginRun r;
  r.run("marker", "@metaharness/hook/nobody-serves-this");
  r.expect_marker_denied_by_the_plugin("the run's hook channel is unreachable");
}

// The plugin fails closed when no channel is named at all (METAHARNESS_HOOK_SOCKET unset: opencode
// started with the plugin but outside a governed run): the call is denied, saying so; nothing ran.
TEST(OpencodePlugin, FailsClosedWhenNoChannelIsNamed) {
  BarePluginRun r;
  r.run("marker", std::nullopt);
  r.expect_marker_denied_by_the_plugin("METAHARNESS_HOOK_SOCKET is not set");
}

// The plugin's own wait is bounded: a run that takes the request and never answers (here with
// METAHARNESS_HOOK_DEADLINE_S = 1) gets the call denied by the plugin when its timer fires, and
// the plugin hangs up; nothing ran.
TEST(OpencodePlugin, FailsClosedWhenItsOwnDeadlinePasses) {
  std::string name = "mh-test-plugin-silent-" + std::to_string(::getpid());
  int listener = listen_abstract(name);
  ASSERT_GE(listener, 0) << std::strerror(errno);
  std::string request;
  bool hung_up = false;
  std::thread server([&] {
    int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(c, buf, sizeof buf)) > 0)  // never answers: reads until the plugin gives up
      request.append(buf, static_cast<std::size_t>(n));
    hung_up = n == 0;
    ::close(c);
  });
  BarePluginRun r;
  r.run("marker", "@" + name, "1");
  ::shutdown(listener, SHUT_RDWR);
  server.join();
  ::close(listener);
  r.expect_marker_denied_by_the_plugin("no answer within 1 s");
  EXPECT_NE(request.find("\"call_id\":\"toolu_marker\""), std::string::npos) << "the plugin asked: " << request;
  EXPECT_TRUE(hung_up) << "the plugin closed the channel when it gave up";
}

// The plugin fails closed on every answer it cannot use: garbage, a channel closed without an
// answer, a decision it does not know. Three calls in one message, one each; none ran.
TEST(OpencodePlugin, FailsClosedOnGarbageOnSilenceAndOnAnUnknownDecision) {
  std::string name = "mh-test-plugin-" + std::to_string(::getpid());
  int listener = listen_abstract(name);
  ASSERT_GE(listener, 0) << std::strerror(errno);
  std::thread server([listener] {
    for (int served = 0; served < 3; ++served) {
      int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      std::string request;
      char buf[4096];
      for (ssize_t n; request.find('\n') == std::string::npos && (n = ::read(c, buf, sizeof buf)) > 0;)
        request.append(buf, static_cast<std::size_t>(n));
      std::string answer = request.find("toolu_a") != std::string::npos   ? "garbage\n"
                           : request.find("toolu_c") != std::string::npos ? "{\"decision\":\"maybe\"}\n"
                                                                          : "";  // b: closed, no answer
      (void)::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  });
  BarePluginRun r;
  r.run("three_calls", "@" + name);
  ::shutdown(listener, SHUT_RDWR);
  server.join();
  ::close(listener);
  ASSERT_TRUE(r.prompt_answered);
  for (auto file : {"a.txt", "b.txt", "c.txt"})
    EXPECT_FALSE(fs::exists(r.work / file)) << file << " must not exist: its call was denied";
  const std::string denied = "metaharness could not decide this call, so it is denied: ";
  EXPECT_NE(r.tool_error("toolu_a").find(denied + "garbage"), std::string::npos) << r.tool_error("toolu_a");
  EXPECT_NE(r.tool_error("toolu_b").find(denied + "the run closed the channel without answering"), std::string::npos)
      << r.tool_error("toolu_b");
  EXPECT_NE(r.tool_error("toolu_c").find(denied + "an answer with no known decision"), std::string::npos)
      << r.tool_error("toolu_c");
}

}  // namespace
}  // namespace mh::test
