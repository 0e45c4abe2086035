#include "daemon/viewer/viewer_routes.hpp"

#include <boost/asio/this_coro.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/parse.hpp>
#include <charconv>

#include "daemon/server/run_access.hpp"
#include "daemon/server/run_summary.hpp"
#include "daemon/server/server.hpp"
#include "daemon/stream/stream_reader.hpp"
#include "daemon/viewer/viewer_assets.hpp"
#include "protocol/event_text.hpp"
#include "protocol/json.hpp"

namespace mh::daemon {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

using Clock = std::chrono::system_clock;

constexpr std::chrono::milliseconds kMaxWait{20000};

// Every answer: never cached (a page's view is of now), never sniffed as another type.
void common_headers(http::Response& r) {
  r.headers.emplace_back("Cache-Control", "no-store");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
}

http::Response json_answer(unsigned status, const json::object& body) {
  http::Response r;
  r.status = status;
  r.content_type = "application/json";
  r.body = json::serialize(body);
  common_headers(r);
  return r;
}

http::Response refusal(unsigned status, std::string_view code, std::string reason) {
  json::object body;
  body["code"] = code;
  body["reason"] = std::move(reason);
  http::Response r = json_answer(status, body);
  if (status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"metaharness viewer\"");
  return r;
}

// The grant of the request's bearer token, if it reaches `needs`; else the refusal to send.
struct Access {
  std::optional<ViewerGrant> grant;
  http::Response refused;
};

Access authorize(Server& server, const http::Request& request, Role needs) {
  Access a;
  auto header = request.header("authorization");
  constexpr std::string_view kScheme = "bearer ";
  if (!header || header->size() <= kScheme.size() ||
      !std::equal(kScheme.begin(), kScheme.end(), header->begin(),
                  [](char x, char y) { return x == std::tolower(static_cast<unsigned char>(y)); })) {
    a.refused = refusal(401, "UNAUTHORIZED",
                        "the viewer's API needs `Authorization: Bearer <token>`; `metaharness viewer` prints a page "
                        "address that carries one");
    return a;
  }
  auto grant = server.viewer_tokens.check(std::string_view(*header).substr(kScheme.size()), Clock::now());
  if (!grant) {
    a.refused = refusal(401, "UNAUTHORIZED",
                        "this daemon does not know the token, or it has expired (tokens end at a restart); ask "
                        "`metaharness viewer` for a new one");
    return a;
  }
  if (grant->role < needs) {
    a.refused = refusal(403, "FORBIDDEN",
                        "this token has the role " + std::string(to_string(grant->role)) + "; this needs " +
                            std::string(to_string(needs)));
    return a;
  }
  a.grant = std::move(grant);
  return a;
}

// The query's parameters, decoded (Boost.URL); nullopt when the target is not a valid URL.
std::optional<std::map<std::string, std::string>> query_of(const http::Request& request) {
  auto parsed = boost::urls::parse_origin_form(request.target);
  if (!parsed) return std::nullopt;
  std::map<std::string, std::string> out;
  for (auto param : parsed->params())
    out.emplace(param.key, param.has_value ? param.value : std::string());
  return out;
}

std::optional<std::uint64_t> number(const std::string& text) {
  std::uint64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return n;
}

// Whether a grant may command the run: the socket's rule, for the peer that asked for the token.
bool may_control(const ViewerGrant& grant, const RunEntry& e) {
  return daemon::may_control(grant.role, grant.minted_by.uid, e);
}

json::object grant_json(const ViewerGrant& grant) {
  json::object o;
  o["role"] = to_string(grant.role);
  o["uid"] = grant.minted_by.uid;
  o["expires_at"] = rfc3339(grant.expires_at);
  return o;
}

asio::awaitable<std::optional<RunEntry>> find(std::shared_ptr<Server> server, const std::string& id) {
  auto look = [server, id] { return server->registry.lookup(id); };
  auto e = co_await server->on_registry(std::move(look));
  if (e && e->dir.empty()) e.reset();  // admitted, not yet created
  co_return e;
}

http::Response unknown_run(const std::string& id) {
  return refusal(404, "UNKNOWN_RUN", "no run \"" + protocol::excerpt(id, 80) + "\" on this daemon");
}

// ---------------------------------------------------------------------------------------------

asio::awaitable<http::Response> page_file(ViewerAsset asset) {
  http::Response r;
  r.content_type = std::string(asset.content_type);
  r.body = std::string(asset.body);
  common_headers(r);
  // The page runs only its own script and talks only to this listener; vendor text it shows
  // could never run as script even if it got past textContent.
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                         "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  co_return r;
}

asio::awaitable<http::Response> api_runs(std::shared_ptr<Server> server, http::Request request) {
  Access access = authorize(*server, request, Role::observe);
  if (!access.grant) co_return access.refused;
  auto snapshot = [server] { return server->registry.snapshot(); };
  auto entries = co_await server->on_registry(std::move(snapshot));
  json::array runs;
  for (auto& e : entries) {
    if (e.dir.empty()) continue;
    json::object one = co_await summary(e);
    runs.push_back(std::move(one));
  }
  json::object body = grant_json(*access.grant);
  body["runs"] = std::move(runs);
  co_return json_answer(200, body);
}

asio::awaitable<http::Response> api_run(std::shared_ptr<Server> server, http::Request request) {
  Access access = authorize(*server, request, Role::observe);
  if (!access.grant) co_return access.refused;
  auto query = query_of(request);
  if (!query || !query->count("run_id")) co_return refusal(400, "MALFORMED", "/viewer/api/run takes ?run_id=RUN");
  const std::string id = query->at("run_id");
  auto e = co_await find(server, id);
  if (!e) co_return unknown_run(id);
  json::object body;
  body["run"] = co_await summary(*e);
  body["pending"] = co_await pending_calls_json(e->run);
  body["can_decide"] = e->run != nullptr && may_control(*access.grant, *e);
  co_return json_answer(200, body);
}

asio::awaitable<http::Response> api_events(std::shared_ptr<Server> server, http::Request request) {
  Access access = authorize(*server, request, Role::observe);
  if (!access.grant) co_return access.refused;
  auto query = query_of(request);
  if (!query || !query->count("run_id"))
    co_return refusal(400, "MALFORMED", "/viewer/api/events takes ?run_id=RUN&from_seq=N[&wait_ms=M]");
  std::uint64_t from = 1;
  if (query->count("from_seq")) {
    auto n = number(query->at("from_seq"));
    if (!n || *n == 0) co_return refusal(400, "MALFORMED", "from_seq is a seq: 1 or more");
    from = *n;
  }
  std::chrono::milliseconds wait{0};
  if (query->count("wait_ms")) {
    auto n = number(query->at("wait_ms"));
    if (!n || *n > static_cast<std::uint64_t>(kMaxWait.count()))
      co_return refusal(400, "MALFORMED", "wait_ms is 0 to " + std::to_string(kMaxWait.count()));
    wait = std::chrono::milliseconds(*n);
  }
  const std::string id = query->at("run_id");
  auto e = co_await find(server, id);
  if (!e) co_return unknown_run(id);

  auto opened = open_stream(*e);  // holds a recovered log's state while it is read
  if (!opened) co_return refusal(500, "REFUSED", opened.error());
  auto executor = co_await asio::this_coro::executor;
  auto reader = StreamReader::open(opened->shared, executor, ReaderStart::at_seq(from));
  if (!reader)
    co_return refusal(400, "MALFORMED", "cannot start at seq " + std::to_string(from) + ": " + reader.error());
  bool live = true;
  auto batch = reader->read_some();
  if (batch && batch->count == 0 && !batch->reached_end && wait.count() > 0) {
    auto outcome = co_await reader->wait_for_more(std::chrono::steady_clock::now() + wait);
    if (outcome == WaitOutcome::writer_gone) live = false;
    batch = reader->read_some();
  }
  if (!batch) co_return refusal(500, "REFUSED", "reading run " + e->id + " failed: " + batch.error());
  json::array events;
  std::string_view bytes = batch->bytes;
  while (!bytes.empty()) {
    auto end = bytes.find('\n');
    std::string_view line = bytes.substr(0, end);
    bytes.remove_prefix(end == std::string_view::npos ? bytes.size() : end + 1);
    json::object one;
    // The record as written; a line that does not read as JSON is shown, not dropped.
    std::optional<json::value> record = protocol::parse_json(line);
    one["record"] = record ? std::move(*record) : json::value(nullptr);
    one["text"] = protocol::human_line(line);
    events.push_back(std::move(one));
  }
  const bool closed = batch->reached_end || reader->finished();
  json::object body;
  body["run_id"] = e->id;
  body["from_seq"] = from;
  body["next_seq"] = reader->next_seq();
  body["closed"] = closed;
  // More can come while lines are unread past this batch, or while the run's writer is there: the
  // run still hosted, or its log still closing (the daemon hears of a close before its
  // stream.closed is readable, and a close a full disk refused is written once space returns).
  const bool writer_there = e->run != nullptr || (e->stream && !e->stream->writer_gone());
  body["live"] = !closed && (reader->has_unread() || (live && writer_there));
  body["events"] = std::move(events);
  co_return json_answer(200, body);
}

asio::awaitable<http::Response> api_decide(std::shared_ptr<Server> server, http::Request request) {
  Access access = authorize(*server, request, Role::control);
  if (!access.grant) co_return access.refused;
  std::string problem;
  auto parsed = protocol::parse_json(request.body, &problem);
  if (!parsed || !parsed->is_object())
    co_return refusal(400, "MALFORMED", "the body is a JSON object {run_id, call_id, decision}: " + problem);
  const json::object& o = parsed->get_object();
  const json::value* run_id = o.if_contains("run_id");
  const json::value* call_id = o.if_contains("call_id");
  const json::value* decision_field = o.if_contains("decision");
  if (!run_id || !run_id->is_string() || !call_id || !call_id->is_string() || !decision_field)
    co_return refusal(400, "MALFORMED", "the body is a JSON object {run_id, call_id, decision}");
  auto decision = protocol::read_decision(*decision_field, problem);
  if (!decision) co_return refusal(400, "MALFORMED", "the decision is refused: " + problem);
  const std::string id(run_id->get_string());
  auto e = co_await find(server, id);
  if (!e) co_return unknown_run(id);
  if (!may_control(*access.grant, *e))
    co_return refusal(403, "FORBIDDEN",
                      "run " + id + " belongs to uid " + std::to_string(e->owner_uid) +
                          "; answering for another user's run needs an admin token");

  protocol::Command command{"viewer-" + std::to_string(++server->command_counter),
                            protocol::cmd::ToolDecide{std::string(call_id->get_string()), std::move(*decision)}};
  protocol::PeerIdentity peer = access.grant->minted_by;
  peer.via = "viewer";
  DeliveredResult answer = co_await deliver_command(*e, std::move(command), peer);
  co_return json_answer(200, result_fields(answer.result, answer.recorded));
}

}  // namespace

std::vector<http::Route> viewer_routes(std::shared_ptr<Server> server) {
  std::vector<http::Route> routes;
  for (const ViewerAsset& asset : viewer_assets()) {
    auto serve = [asset](http::Request) { return page_file(asset); };
    if (asset.name == "viewer.html") {
      routes.push_back({"/viewer", {"GET"}, serve});
      routes.push_back({"/viewer/", {"GET"}, serve});
    } else {
      routes.push_back({"/viewer/" + std::string(asset.name), {"GET"}, serve});
    }
  }
  auto runs = [server](http::Request r) { return api_runs(server, std::move(r)); };
  auto run = [server](http::Request r) { return api_run(server, std::move(r)); };
  auto events = [server](http::Request r) { return api_events(server, std::move(r)); };
  auto decide = [server](http::Request r) { return api_decide(server, std::move(r)); };
  routes.push_back({"/viewer/api/runs", {"GET"}, runs});
  routes.push_back({"/viewer/api/run", {"GET"}, run});
  routes.push_back({"/viewer/api/events", {"GET"}, events});
  routes.push_back({"/viewer/api/decide", {"POST"}, decide});
  return routes;
}

}  // namespace mh::daemon
