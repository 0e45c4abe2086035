// The viewer on a real daemon hosting a REAL Claude run against the scripted endpoint: its API
// over HTTP (what a token grants, what is refused and how), and the page in a real headless
// Chromium, where a pending approval is answered and the run's record says who answered.
#include <gtest/gtest.h>

#include "protocol/json.hpp"
#include "tests/http/http_test_client.hpp"
#include "tests/support/daemon_harness.hpp"
#include "tests/viewer/webdriver.hpp"

namespace mh::test {
namespace {

namespace json = boost::json;

std::string scenario_json(const std::string& name) {
  auto v = protocol::parse_json(read_file(source_dir() / "tests/scenarios/claude" / (name + ".json")));
  return v ? protocol::canonical_json(*v) : "null";
}

std::string json_string(const std::string& text) {
  return protocol::canonical_json(json::value(text));
}

// The daemon's own figures about a run, read from its socket.
struct Minted {
  std::string token, url, role;
};

class Viewer : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon = std::make_unique<DaemonUnderTest>(dir.path(), "[http]\nlisten = \"127.0.0.1:0\"\n");
    ASSERT_TRUE(daemon->wait_notify("READY=1")) << daemon->stderr_text();
    address = trim(read_file(daemon->state_dir() / "http.addr"));
    ASSERT_FALSE(address.empty()) << daemon->stderr_text();
  }

  static std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
      s.pop_back();
    return s;
  }

  // A Claude run that asks before its one Bash call (touch marker.txt) and waits up to 2 min.
  std::string submit_asking_run() {
    SocketClient c(daemon->socket());
    auto reply = c.request(socket_request("submit", R"("run":{"adapter":"claude","prompt":"go","model_scenario":)" +
                                                        scenario_json("bash_marker") +
                                                        R"(,"decisions":"ask","decision_deadline_ms":120000})"));
    EXPECT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
    return reply ? reply->str("run_id") : "";
  }

  std::optional<Minted> mint(const std::string& fields = "") {
    SocketClient c(daemon->socket());
    auto reply = c.request(socket_request("viewer", fields));
    if (!reply || reply->str("reply") != "viewer") {
      ADD_FAILURE() << (reply ? reply->raw : "no reply");
      return std::nullopt;
    }
    return Minted{reply->str("token"), reply->str("url"), reply->str("role")};
  }

  std::optional<HttpAnswer> api(const std::string& method, const std::string& target, const std::string& token,
                                const std::string& body = "") {
    auto [host, port] = split_host_port(address);
    HttpTestClient client(host, port, std::chrono::seconds(30));
    std::vector<std::pair<std::string, std::string>> headers;
    if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
    if (!body.empty()) headers.emplace_back("Content-Type", "application/json");
    return client.request(method, target, headers, body);
  }

  static json::object body_of(const std::optional<HttpAnswer>& answer) {
    if (!answer) return {};
    auto v = protocol::parse_json(answer->body);
    return v && v->is_object() ? v->as_object() : json::object{};
  }

  // Waits (bounded) until the run has a pending call; returns its call id.
  std::string pending_call(const std::string& run, const std::string& token) {
    std::string call;
    eventually(
        [&] {
          auto body = body_of(api("GET", "/viewer/api/run?run_id=" + run, token));
          const json::value* pending = body.if_contains("pending");
          if (!pending || !pending->is_array() || pending->as_array().empty()) return false;
          call = std::string(pending->as_array()[0].as_object().at("call_id").as_string());
          return true;
        },
        60s);
    return call;
  }

  std::vector<json::object> record(const std::string& run) {
    std::vector<json::object> out;
    for (const auto& line : read_lines(daemon->run_dir(run) / "events.jsonl"))
      if (auto v = protocol::parse_json(line); v && v->is_object()) out.push_back(v->as_object());
    return out;
  }

  std::optional<json::object> decided(const std::string& run) {
    for (auto& e : record(run))
      if (e.at("event") == "tool.decided") return e;
    return std::nullopt;
  }

  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::unique_ptr<DaemonUnderTest> daemon;
  std::string address;
};

TEST_F(Viewer, TheApiNeedsAKnownTokenAndSaysSoByName) {
  auto none = api("GET", "/viewer/api/runs", "");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401u);
  EXPECT_EQ(body_of(none).at("code"), "UNAUTHORIZED");
  EXPECT_NE(none->headers["www-authenticate"].find("Bearer"), std::string::npos);
  auto unknown = api("GET", "/viewer/api/runs", "not-a-token-this-daemon-minted");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 401u);
  EXPECT_NE(std::string(body_of(unknown).at("reason").as_string()).find("does not know the token"), std::string::npos);

  auto minted = mint();
  ASSERT_TRUE(minted);
  EXPECT_EQ(minted->role, "admin") << "the test runs as the daemon's own uid: admin";
  EXPECT_EQ(minted->url, "http://" + address + "/viewer#token=" + minted->token)
      << "the token travels in the fragment, which a browser never sends to the server";
  auto runs = api("GET", "/viewer/api/runs", minted->token);
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->status, 200u) << runs->body;
  EXPECT_EQ(body_of(runs).at("role"), "admin");
  EXPECT_TRUE(body_of(runs).at("runs").as_array().empty());
  EXPECT_EQ(runs->headers["cache-control"], "no-store");
}

TEST_F(Viewer, ThePageIsServedWithAPolicyThatRunsOnlyItsOwnScript) {
  auto page = http_get(address, "/viewer");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200u);
  EXPECT_NE(page->headers["content-type"].find("text/html"), std::string::npos);
  EXPECT_NE(page->body.find("/viewer/viewer.js"), std::string::npos);
  EXPECT_NE(page->headers["content-security-policy"].find("script-src 'self'"), std::string::npos);
  EXPECT_EQ(page->headers["referrer-policy"], "no-referrer");
  auto script = http_get(address, "/viewer/viewer.js");
  ASSERT_TRUE(script);
  EXPECT_EQ(script->status, 200u);
  EXPECT_NE(script->headers["content-type"].find("javascript"), std::string::npos);
  EXPECT_EQ(script->body, read_file(source_dir() / "daemon/viewer/viewer.js")) << "the page is the checked-in file";
}

TEST_F(Viewer, AnObserveTokenSeesTheRunButCannotAnswerIt) {
  std::string run = submit_asking_run();
  auto observe = mint(R"("role":"observe")");
  ASSERT_TRUE(observe);
  EXPECT_EQ(observe->role, "observe");
  std::string call = pending_call(run, observe->token);
  ASSERT_FALSE(call.empty());
  auto view = body_of(api("GET", "/viewer/api/run?run_id=" + run, observe->token));
  EXPECT_EQ(view.at("can_decide"), false);
  EXPECT_EQ(view.at("run").as_object().at("pending_decisions"), 1);
  auto pending = view.at("pending").as_array()[0].as_object();
  EXPECT_GT(pending.at("remaining_ms").to_number<std::int64_t>(), 0);
  EXPECT_LE(pending.at("remaining_ms").to_number<std::int64_t>(), 120000);

  const std::string allow =
      R"({"run_id":")" + run + R"(","call_id":)" + json_string(call) + R"(,"decision":{"decision":"allow"}})";
  auto refused = api("POST", "/viewer/api/decide", observe->token, allow);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 403u);
  EXPECT_EQ(body_of(refused).at("code"), "FORBIDDEN");
  EXPECT_FALSE(decided(run)) << "nothing was decided";

  // A deny needs a reason, from the page as on the wire; a malformed body is refused by name.
  auto control = mint(R"("role":"control")");
  ASSERT_TRUE(control);
  auto blank =
      api("POST", "/viewer/api/decide", control->token,
          R"({"run_id":")" + run + R"(","call_id":)" + json_string(call) + R"(,"decision":{"decision":"deny"}})");
  ASSERT_TRUE(blank);
  EXPECT_EQ(blank->status, 400u);
  EXPECT_EQ(body_of(blank).at("code"), "MALFORMED");
  auto junk = api("POST", "/viewer/api/decide", control->token, "{not json");
  ASSERT_TRUE(junk);
  EXPECT_EQ(junk->status, 400u);
  auto elsewhere = api("POST", "/viewer/api/decide", control->token,
                       R"({"run_id":"no-such-run","call_id":"x","decision":{"decision":"allow"}})");
  ASSERT_TRUE(elsewhere);
  EXPECT_EQ(elsewhere->status, 404u);
  EXPECT_EQ(body_of(elsewhere).at("code"), "UNKNOWN_RUN");

  // The owner's control token answers: the record names the page and the uid that asked for it.
  auto taken = api("POST", "/viewer/api/decide", control->token,
                   R"({"run_id":")" + run + R"(","call_id":)" + json_string(call) +
                       R"(,"decision":{"decision":"deny","reason":"not from this page"}})");
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->status, 200u) << taken->body;
  EXPECT_EQ(body_of(taken).at("outcome").as_object().at("result"), "ok") << taken->body;
  EXPECT_EQ(body_of(taken).at("recorded"), true);
  auto again = api("POST", "/viewer/api/decide", control->token, allow);
  ASSERT_TRUE(again);
  EXPECT_EQ(body_of(again).at("outcome").as_object().at("refused").as_object().at("code"), "TOO_LATE")
      << "exactly one decision per call: " << again->body;
  auto d = decided(run);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->at("decided_by"), "embedder");
  EXPECT_EQ(d->at("decision").as_object().at("reason"), "not from this page");
  EXPECT_EQ(d->at("peer").as_object().at("via"), "viewer");
  EXPECT_EQ(d->at("peer").as_object().at("uid").to_number<std::int64_t>(), static_cast<std::int64_t>(::getuid()));
}

TEST_F(Viewer, TheStreamIsReadFromAnySeqAndAWaitEndsWhenTheNextLineIsWritten) {
  std::string run = submit_asking_run();
  auto minted = mint();
  ASSERT_TRUE(minted);
  std::string call = pending_call(run, minted->token);
  ASSERT_FALSE(call.empty());
  auto first = body_of(api("GET", "/viewer/api/events?run_id=" + run + "&from_seq=1", minted->token));
  ASSERT_TRUE(first.contains("events")) << protocol::canonical_json(first);
  const auto& events = first.at("events").as_array();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].as_object().at("record").as_object().at("event"), "session.started");
  EXPECT_NE(std::string(events[0].as_object().at("text").as_string()).find("session.started"), std::string::npos)
      << "each line also comes as `tail` prints it";
  EXPECT_EQ(first.at("closed"), false);
  EXPECT_EQ(first.at("live"), true);
  const auto next = first.at("next_seq").to_number<std::uint64_t>();
  EXPECT_EQ(next, events.size() + 1);

  // A wait from the end returns with the decision's lines once it is taken, well before its bound.
  auto [host, port] = split_host_port(address);
  HttpTestClient waiting(host, port, std::chrono::seconds(30));
  waiting.send_raw("GET /viewer/api/events?run_id=" + run + "&from_seq=" + std::to_string(next) +
                   "&wait_ms=20000 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + minted->token + "\r\n\r\n");
  const auto asked = std::chrono::steady_clock::now();
  SocketClient c(daemon->socket());
  auto result = c.request(socket_request(
      "command", R"("run_id":")" + run + R"(","command":)" + tool_decide("d1", call, R"({"decision":"allow"})")));
  ASSERT_TRUE(result && result->str("reply") == "result") << (result ? result->raw : "no reply");
  auto woke = waiting.read_answer();
  ASSERT_TRUE(woke);
  EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(15));
  auto later = body_of(woke);
  ASSERT_FALSE(later.at("events").as_array().empty()) << woke->body;
  EXPECT_EQ(later.at("events").as_array()[0].as_object().at("record").as_object().at("seq").to_number<std::uint64_t>(),
            next)
      << "no gap, no duplicate";

  auto bad = api("GET", "/viewer/api/events?run_id=" + run + "&from_seq=0", minted->token);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400u);
  auto too_long = api("GET", "/viewer/api/events?run_id=" + run + "&wait_ms=600000", minted->token);
  ASSERT_TRUE(too_long);
  EXPECT_EQ(too_long->status, 400u);
}

TEST_F(Viewer, WithoutAnHttpListenerTheViewerIsRefusedByName) {
  daemon.reset();
  TempDir other{"viewer-no-http"};
  DaemonUnderTest plain(other.path());
  ASSERT_TRUE(plain.wait_notify("READY=1")) << plain.stderr_text();
  SocketClient c(plain.socket());
  auto reply = c.request(socket_request("viewer"));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->str("reply"), "refused");
  EXPECT_EQ(reply->str("code"), "NOT_CONFIGURED") << reply->raw;
}

// The page in a real browser: the run listed, its pending approval shown with its deadline,
// answered with a click, and the decision, who took it and the run's end shown as they happen.
TEST_F(Viewer, APendingApprovalIsAnsweredFromThePageInARealBrowser) {
  std::string run = submit_asking_run();
  auto minted = mint(R"("role":"control")");
  ASSERT_TRUE(minted);
  ASSERT_FALSE(pending_call(run, minted->token).empty());

  Browser browser(dir.path() / "chromium-profile");
  ASSERT_TRUE(browser.started()) << browser.error();
  ASSERT_TRUE(browser.navigate(minted->url)) << browser.error();
  const std::string row = "#runs tbody tr[data-run-id='" + run + "']";
  ASSERT_TRUE(browser.wait_until("return document.querySelector(\"" + row + "\") !== null;", 20s)) << browser.error();
  auto href = browser.script("return location.href;");
  ASSERT_TRUE(href && href->is_string());
  EXPECT_EQ(std::string(href->as_string()).find("token="), std::string::npos)
      << "the token leaves the address bar once read: " << href->as_string();
  auto state = browser.find(row + " td.state");
  ASSERT_TRUE(state) << browser.error();
  EXPECT_EQ(browser.text(*state), "turn");
  auto count = browser.find(row + " td.pending-count");
  ASSERT_TRUE(count) << browser.error();
  EXPECT_EQ(browser.text(*count), "1");
  // Issue 27 §2: a run waiting on a decision is not stalled, and the page says since when.
  auto progress = browser.find(row + " td.progress");
  ASSERT_TRUE(progress) << browser.error();
  EXPECT_EQ(browser.text(*progress).rfind("waiting on a decision since ", 0), 0u) << browser.text(*progress);

  auto open = browser.find(row);
  ASSERT_TRUE(open);
  ASSERT_TRUE(browser.click(*open)) << browser.error();
  const std::string pending = "#pending .pending[data-call-id='toolu_marker']";
  ASSERT_TRUE(browser.wait_until("return document.querySelector(\"" + pending + " button.allow\") !== null;", 20s))
      << browser.error();
  ASSERT_TRUE(
      browser.wait_until("const c = document.querySelector(\"#calls tr.call[data-call-id='toolu_marker'] td.tool\");"
                         "return c !== null && c.textContent === 'Bash';",
                         20s));
  auto remaining = browser.find(pending + " .remaining");
  ASSERT_TRUE(remaining);
  std::string left = browser.text(*remaining);
  EXPECT_NE(left.find("s left"), std::string::npos) << left;
  EXPECT_GT(std::stod(left), 0.0);
  EXPECT_LE(std::stod(left), 120.0);
  auto shot = browser.screenshot();
  ASSERT_TRUE(shot) << browser.error();
  EXPECT_EQ(shot->substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_TRUE(write_artefact(std::filesystem::path(MH_TEST_ARTEFACTS) / "viewer-pending-approval.png", *shot));

  auto allow = browser.find(pending + " button.allow");
  ASSERT_TRUE(allow);
  ASSERT_TRUE(browser.click(*allow)) << browser.error();
  const std::string call_row = "#calls tr.call[data-call-id='toolu_marker']";
  ASSERT_TRUE(browser.wait_until(
      "const r = document.querySelector(\"" + call_row + "\"); return r !== null && r.dataset.decision === 'allow';",
      30s))
      << browser.error();
  auto by = browser.find(call_row + " td.by");
  ASSERT_TRUE(by);
  EXPECT_NE(browser.text(*by).find("embedder"), std::string::npos) << browser.text(*by);
  EXPECT_NE(browser.text(*by).find("viewer"), std::string::npos) << browser.text(*by);
  ASSERT_TRUE(browser.wait_until("return document.getElementById('stream').dataset.closed === 'true';", 90s))
      << "the page follows the stream to its end";
  ASSERT_TRUE(browser.wait_until(
      "const r = document.querySelector(\"" + call_row + "\"); return r !== null && r.dataset.result === 'ok';", 10s));
  auto stream = browser.find("#stream");
  ASSERT_TRUE(stream);
  std::string lines = browser.text(*stream);
  EXPECT_NE(lines.find("stream.closed"), std::string::npos);
  EXPECT_NE(lines.find("tool.decided"), std::string::npos);
  ASSERT_TRUE(browser.wait_until("return document.querySelector(\"#pending .pending\") === null;", 10s))
      << "an answered approval leaves the list";
  ASSERT_TRUE(browser.wait_until(
      "const r = document.querySelector(\"" + row + "\"); return r !== null && r.dataset.state === 'closed';", 10s))
      << "the runs list shows the run closed";
  auto closed = browser.screenshot();
  ASSERT_TRUE(closed);
  EXPECT_TRUE(write_artefact(std::filesystem::path(MH_TEST_ARTEFACTS) / "viewer-run-closed.png", *closed));

  // The record: the page's allow, and the call ran.
  auto d = decided(run);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->at("decision").as_object().at("decision"), "allow");
  EXPECT_EQ(d->at("decided_by"), "embedder");
  EXPECT_EQ(d->at("peer").as_object().at("via"), "viewer");
  EXPECT_TRUE(std::filesystem::exists(daemon->run_dir(run) / "scratch/work/marker.txt"));
}

// Issue 24 item 12: unknown is not zero. The daemon here has no [prices], so the model Claude
// asks for has none: while the run waits on its call (mid-turn, the turn's figures not in yet),
// its spend is unknown and names the model, on the socket (`get`, `list`), in the viewer's API
// and on the page — never $0.
TEST_F(Viewer, AnUnpricedModelsSpendIsUnknownMidTurnOnTheSocketAndOnThePage) {
  std::string run = submit_asking_run();
  auto minted = mint(R"("role":"control")");
  ASSERT_TRUE(minted);
  ASSERT_FALSE(pending_call(run, minted->token).empty()) << "mid-turn: the call waits on its decision";

  auto unknown_and_named = [&](const json::value& spend, const std::string& where) {
    ASSERT_TRUE(spend.is_object()) << where << ": " << protocol::canonical_json(spend);
    const auto& s = spend.as_object();
    EXPECT_TRUE(s.at("usd").is_null()) << where << ": " << protocol::canonical_json(spend);
    ASSERT_TRUE(s.at("unpriced_model").is_string()) << where << ": " << protocol::canonical_json(spend);
    EXPECT_FALSE(s.at("unpriced_model").as_string().empty()) << where;
    EXPECT_GT(s.at("input_tokens").to_number<std::uint64_t>(), 0u) << where << ": the usage was seen";
  };
  SocketClient c(daemon->socket());
  auto got = c.request(socket_request("get", R"("run_id":")" + run + "\""));
  ASSERT_TRUE(got && got->str("reply") == "run") << (got ? got->raw : "no reply");
  unknown_and_named(got->object.at("spend"), "get");
  auto listed = c.request(socket_request("list"));
  ASSERT_TRUE(listed && listed->str("reply") == "runs");
  ASSERT_EQ(listed->object.at("runs").as_array().size(), 1u);
  unknown_and_named(listed->object.at("runs").as_array()[0].as_object().at("spend"), "list");
  auto view = body_of(api("GET", "/viewer/api/run?run_id=" + run, minted->token));
  ASSERT_TRUE(view.contains("run"));
  unknown_and_named(view.at("run").as_object().at("spend"), "/viewer/api/run");

  Browser browser(dir.path() / "chromium-profile");
  ASSERT_TRUE(browser.started()) << browser.error();
  ASSERT_TRUE(browser.navigate(minted->url)) << browser.error();
  const std::string cell = "#runs tbody tr[data-run-id='" + run + "'] td.spend";
  ASSERT_TRUE(browser.wait_until(
      "const c = document.querySelector(\"" + cell + "\"); return c !== null && c.textContent !== '';", 20s))
      << browser.error();
  auto spend = browser.find(cell);
  ASSERT_TRUE(spend);
  std::string text = browser.text(*spend);
  EXPECT_EQ(text.rfind("USD unknown", 0), 0u) << text;
  EXPECT_EQ(text.find("$0.0000"), std::string::npos) << text;

  auto result = c.request(
      socket_request("command", R"("run_id":")" + run + R"(","command":)" +
                                    tool_decide("d1", "toolu_marker", R"({"decision":"deny","reason":"not needed"})")));
  ASSERT_TRUE(result && result->str("reply") == "result") << (result ? result->raw : "no reply");
}

// Issue 24 item 13: on a closed run the page says the run is closed (not that the token may not
// answer: this token is the owner's control token); and a Write result, which Claude leaves
// unflagged (is_error null), reads as its text, never "unknown File created…".
TEST_F(Viewer, AClosedRunsPageSaysItIsClosedAndAnUnflaggedWriteResultReadsAsItsText) {
  const std::string scenario =
      R"({"format":"metaharness.scenario/1","description":"One Write, then an answer.","wires":["anthropic"],)"
      R"("steps":[{"name":"write","content":[{"type":"tool_call","id":"toolu_write","name":"Write",)"
      R"("input":{"file_path":"written.txt","content":"written\n"}}]},)"
      R"({"name":"answer","content":[{"type":"text","text":"Done."}]}]})";
  SocketClient c(daemon->socket());
  auto reply = c.request(socket_request(
      "submit", R"("run":{"adapter":"claude","prompt":"go","decisions":"observe","model_scenario":)" + scenario + "}"));
  ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
  const std::string run = reply->str("run_id");
  auto events = follow_to_end(daemon->socket(), run, 120s);
  ASSERT_FALSE(events.empty());
  ASSERT_EQ(events.back().str("reason"), "completed") << events.back().raw;
  std::optional<json::object> written;
  for (auto& e : record(run))
    if (e.at("event") == "tool.result" && e.at("call_id") == "toolu_write") written = e;
  ASSERT_TRUE(written) << "the Write ran";
  ASSERT_TRUE(written->at("is_error").is_null())
      << "the case of the issue: Claude does not flag a Write's result: " << protocol::canonical_json(*written);
  const std::string content = std::string(written->at("content").as_string());

  auto minted = mint(R"("role":"control")");
  ASSERT_TRUE(minted);
  Browser browser(dir.path() / "chromium-profile");
  ASSERT_TRUE(browser.started()) << browser.error();
  ASSERT_TRUE(browser.navigate(minted->url + "&run=" + run)) << browser.error();
  ASSERT_TRUE(browser.wait_until("return document.getElementById('run-facts').textContent !== '';", 20s))
      << browser.error();
  auto facts = browser.find("#run-facts");
  ASSERT_TRUE(facts);
  std::string said = browser.text(*facts);
  EXPECT_NE(said.find("the run is closed: nothing is left to answer"), std::string::npos) << said;
  EXPECT_EQ(said.find("may look, not answer"), std::string::npos) << said;

  const std::string row = "#calls tr.call[data-call-id='toolu_write']";
  ASSERT_TRUE(browser.wait_until(
      "const r = document.querySelector(\"" + row + "\"); return r !== null && r.dataset.result !== undefined;", 20s))
      << browser.error();
  auto result = browser.find(row + " td.result");
  ASSERT_TRUE(result);
  std::string shown = browser.text(*result);
  EXPECT_EQ(shown.find("unknown"), std::string::npos) << shown;
  EXPECT_EQ(shown.rfind("File created", 0), 0u) << shown;
  EXPECT_EQ(shown.substr(0, 40), content.substr(0, 40)) << "the result's text, as it is, with nothing before it";
  auto flagged = browser.script("return document.querySelector(\"" + row + "\").dataset.result;");
  ASSERT_TRUE(flagged && flagged->is_string());
  EXPECT_EQ(flagged->as_string(), "unflagged");
}

// Issue 27: why a run failed is on the page, in the closed vocabulary (the detail as its title).
TEST_F(Viewer, AFailedRunsPageSaysWhyInTheFailureVocabulary) {
  SocketClient c(daemon->socket());
  // A seam breaker declared: refused at launch, nothing spawns.
  auto reply = c.request(socket_request(
      "submit", R"("run":{"adapter":"claude","prompt":"go","model_endpoint":{"base_url":"http://127.0.0.1:9"},)"
                R"("vendor_env":{"CLAUDE_CODE_SIMPLE":"1"}})"));
  ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
  const std::string run = reply->str("run_id");
  auto events = follow_to_end(daemon->socket(), run, 60s);
  ASSERT_FALSE(events.empty());
  auto minted = mint(R"("role":"observe")");
  ASSERT_TRUE(minted);
  Browser browser(dir.path() / "chromium-profile");
  ASSERT_TRUE(browser.started()) << browser.error();
  ASSERT_TRUE(browser.navigate(minted->url + "&run=" + run)) << browser.error();
  ASSERT_TRUE(
      browser.wait_until("return document.getElementById('run-state').textContent.startsWith('closed (error');", 20s))
      << browser.error();
  auto state = browser.script("const s = document.getElementById('run-state'); return [s.textContent, s.title];");
  ASSERT_TRUE(state && state->is_array()) << browser.error();
  EXPECT_EQ(state->as_array().at(0).as_string(), "closed (error: launch, not retryable)");
  EXPECT_NE(std::string(state->as_array().at(1).as_string()).find("LAUNCH_REFUSED"), std::string::npos)
      << "the detail is the title";
}

// Issue 24 item 13: a new viewer address pasted into a tab that has a page open changes only the
// fragment (the page is not loaded again); the token it carries wins over the one the tab kept.
TEST_F(Viewer, ANewAddressInAnOpenTabUsesItsOwnToken) {
  auto observe = mint(R"("role":"observe")");
  auto control = mint(R"("role":"control")");
  ASSERT_TRUE(observe && control);
  Browser browser(dir.path() / "chromium-profile");
  ASSERT_TRUE(browser.started()) << browser.error();
  ASSERT_TRUE(browser.navigate(observe->url)) << browser.error();
  ASSERT_TRUE(
      browser.wait_until("return document.getElementById('access').textContent.startsWith('role observe');", 20s))
      << browser.error();
  ASSERT_TRUE(browser.script("window.sameDocument = true; location.href = " + json_string(control->url) + ";"));
  ASSERT_TRUE(
      browser.wait_until("return document.getElementById('access').textContent.startsWith('role control');", 20s))
      << "the pasted address's token is the one used; the page says: "
      << browser.script("return document.getElementById('access').textContent;").value_or("?");
  auto same = browser.script("return window.sameDocument === true;");
  ASSERT_TRUE(same && same->is_bool());
  EXPECT_TRUE(same->as_bool()) << "the case of the issue: the page was not loaded again";
  auto kept = browser.script("return sessionStorage.getItem('metaharness.viewer.token');");
  ASSERT_TRUE(kept && kept->is_string());
  EXPECT_EQ(kept->as_string(), control->token) << "the tab keeps the new token";
  auto href = browser.script("return location.href;");
  ASSERT_TRUE(href && href->is_string());
  EXPECT_EQ(std::string(href->as_string()).find("token="), std::string::npos) << "and it leaves the address bar";
}

}  // namespace
}  // namespace mh::test
