// `metaharness daemon` and its clients: submit, attach, tail, ls, halt, decide, status, viewer. The
// clients speak docs/socket-api.md and nothing else.
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "cli/run_spec_options.hpp"
#include "cli/socket_client.hpp"
#include "cli/verbs.hpp"
#include "daemon/config/config.hpp"
#include "daemon/fleet/fleet_host.hpp"
#include "daemon/server/daemon.hpp"
#include "daemon/server/socket_api.hpp"
#include "protocol/event_text.hpp"
#include "protocol/line_framer.hpp"
#include "protocol/types.hpp"

namespace mh::cli {

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using daemon::reply_line;
using daemon::request_line;

using Client = SocketClient;

struct ReplyView {
  json::object o;
  std::string reply() const {
    auto* v = o.if_contains("reply");
    return v && v->is_string() ? std::string(v->get_string()) : "";
  }
  bool is_socket() const {
    auto* v = o.if_contains("format");
    return v && v->is_string() && v->get_string() == daemon::kSocketFormat;
  }
};

std::optional<ReplyView> parse_reply(const std::string& line) {
  auto v = protocol::parse_json(line);
  if (!v || !v->is_object()) return std::nullopt;
  return ReplyView{v->get_object()};
}

std::string field(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  if (!v || v->is_null()) return "";
  return v->is_string() ? std::string(v->get_string()) : protocol::canonical_json(*v);
}

int refused(const ReplyView& r) {
  // The reason may quote what a peer or a run sent: shown, never obeyed by the terminal.
  std::cerr << "metaharness: refused (" << protocol::printable(field(r.o, "code"))
            << "): " << protocol::printable(field(r.o, "reason")) << "\n";
  return 1;
}

// Connects, sends one request and returns the first reply line.
std::optional<ReplyView> ask(Client& c, const std::string& socket, const std::string& request, int& status) {
  if (auto error = c.connect(socket)) {
    std::cerr << "metaharness: " << *error << "\n";
    status = 2;
    return std::nullopt;
  }
  c.send(request);
  auto line = c.next();
  if (!line) {
    std::cerr << "metaharness: the daemon closed the connection without answering\n";
    status = 2;
    return std::nullopt;
  }
  auto reply = parse_reply(*line);
  if (!reply) {
    std::cerr << "metaharness: unreadable reply: " << *line << "\n";
    status = 2;
  }
  return reply;
}

// ask(), wanting the reply named `expected`: a refusal (or another reply) is reported, and its
// exit status set.
std::optional<ReplyView> ask_for(Client& c, const std::string& socket, const std::string& request,
                                 std::string_view expected, int& status) {
  auto reply = ask(c, socket, request, status);
  if (reply && reply->reply() != expected) {
    status = refused(*reply);
    return std::nullopt;
  }
  return reply;
}

bool stdout_is_terminal() {
  return ::isatty(STDOUT_FILENO) == 1;
}

// Prints a stream's lines until the daemon says `end` (or closes). Event lines: raw, or one
// readable line each.
int print_stream(Client& c, bool human) {
  while (auto line = c.next()) {
    auto reply = parse_reply(*line);
    if (reply && reply->is_socket()) {
      if (reply->reply() == "end") return 0;
      if (reply->reply() == "refused") return refused(*reply);
      if (!human)
        std::cout << *line << "\n";
      else if (reply->reply() == "pending")
        std::cout << "pending  " << protocol::printable(field(reply->o, "call_id")) << " (tool.requested seq "
                  << field(reply->o, "requested_seq") << "), " << field(reply->o, "remaining_ms") << " ms left\n";
      std::cout.flush();
      continue;
    }
    std::cout << (human ? protocol::human_line(*line) : *line) << "\n";
    std::cout.flush();
  }
  // No `end`: the stream was cut short (the daemon went away mid-stream). Never a quiet success.
  std::cerr << "metaharness: the daemon closed the connection before the stream's end; what was printed is "
               "all that arrived (tail again with --from to resume)\n";
  return 2;
}

// ---------------------------------------------------------------------------------------------

json::object run_object(const RunSpecOptions& o, std::string& error) {
  json::object run;
  run["adapter"] = o.adapter;
  run["prompt"] = o.prompt;
  run["decisions"] = o.decisions;
  run["decision_deadline_ms"] = o.decision_deadline_ms;
  if (!o.stall_after.empty()) {
    auto ms = parse_stall_after(o.stall_after);
    if (!ms) {
      error = ms.error();
      return {};
    }
    run["stall_after_ms"] = *ms;
  }
  if (!o.on_stall.empty()) run["on_stall"] = o.on_stall;
  if (!o.park_after.empty()) {
    auto ms = parse_stall_after(o.park_after, "--park-after");
    if (!ms) {
      error = ms.error();
      return {};
    }
    run["park_after_ms"] = *ms;
  }
  auto read = [&](const std::string& path) -> std::optional<json::value> {
    auto bytes = read_file_bytes(path, error);
    if (!bytes) return std::nullopt;
    std::string parse_error;
    auto v = protocol::parse_json(*bytes, &parse_error);
    if (!v) error = path + " is not JSON: " + parse_error;
    return v;
  };
  if (!o.frame_path.empty()) {
    auto frame = read(o.frame_path);
    if (!frame) return {};
    run["frame"] = *frame;
  }
  if (!o.model_scenario.empty()) {
    auto scenario = read(o.model_scenario);
    if (!scenario) return {};
    run["model_scenario"] = *scenario;
  }
  if (!o.model_endpoint.empty()) {
    json::object endpoint{{"base_url", o.model_endpoint}};
    if (!o.model_token_env.empty()) {
      const char* token = std::getenv(o.model_token_env.c_str());
      if (!token) {
        error = o.model_token_env + " is not set";
        return {};
      }
      endpoint["token"] = token;
    }
    run["model_endpoint"] = std::move(endpoint);
  }
  if (!o.upstream.empty()) run["upstream"] = o.upstream;
  if (!o.egress.empty()) {
    json::array egress;
    for (const auto& destination : o.egress)
      egress.emplace_back(destination);
    run["egress"] = std::move(egress);
  }
  if (!o.model.empty()) run["model"] = o.model;
  if (!o.cwd.empty()) run["cwd"] = o.cwd;
  for (auto [key, list] : {std::pair{"vendor_env", &o.vendor_env}, std::pair{"vendor_options", &o.vendor_options},
                           std::pair{"labels", &o.labels}}) {
    json::object m;
    for (const auto& kv : *list) {
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        error = std::string(key) + ": expected KEY=VALUE, got \"" + kv + "\"";
        return {};
      }
      m[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    run[key] = std::move(m);
  }
  json::array requires_list;
  for (const auto& r : o.requires_commands)
    requires_list.emplace_back(r);
  run["requires"] = std::move(requires_list);
  run["keep_open"] = o.keep_open;
  run["deny_only"] = o.deny_only;
  run["hermetic"] = o.hermetic;
  adapters::Budgets budget;  // read by the same rules as `metaharness run`, sent as numbers
  for (const auto& kv : o.budgets) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      error = "--budget: expected KEY=VALUE, got \"" + kv + "\"";
      return {};
    }
    std::string problem;
    if (!adapters::set_budget(budget, kv.substr(0, eq), kv.substr(eq + 1), problem)) {
      error = "--budget: " + problem;
      return {};
    }
  }
  run["budget"] = adapters::budgets_to_json(budget);
  adapters::RunLimits limits;  // likewise
  for (const auto& kv : o.limits) {
    auto eq = kv.find('=');
    std::string problem = "expected KEY=VALUE, got \"" + kv + "\"";
    if (eq == std::string::npos || eq == 0 ||
        !adapters::set_limit(limits, kv.substr(0, eq), kv.substr(eq + 1), problem)) {
      error = "--limit: " + problem;
      return {};
    }
  }
  if (adapters::any_limit(limits)) run["limits"] = adapters::limits_to_json(limits);
  return run;
}

struct ClientOptions {
  std::string socket = daemon::default_socket_path().string();
  RunSpecOptions spec;
  std::string run_id;
  std::string call_id;
  std::string decision;
  std::string reason;
  std::string input;
  std::string command_id;
  std::int64_t from_seq = -1;
  bool follow = false;
  bool json_out = false;
  bool human_out = false;
  bool tail_after_submit = false;
  bool fleet = false;      // submit, ls, tail: through the fleet ([fleet], docs/fleet.md)
  std::string request_id;  // submit: the same id makes one run however often it is sent
  // daemon
  std::string config_file;
  std::string socket_override;
  std::string state_dir_override;
  // viewer
  std::string role;
  std::int64_t ttl_s = 0;
};

bool human_output(const ClientOptions& o) {
  if (o.json_out) return false;
  return o.human_out || stdout_is_terminal();
}

int submit_verb(const ClientOptions& o) {
  std::string error;
  json::object run = run_object(o.spec, error);
  if (!error.empty()) {
    std::cerr << "metaharness submit: " << error << "\n";
    return 2;
  }
  Client c;
  int status = 0;
  json::object request{{"run", run}};
  if (o.fleet) request["fleet"] = true;
  if (!o.request_id.empty()) request["request_id"] = o.request_id;
  auto reply = ask_for(c, o.socket, request_line("submit", "submit", request), "submitted", status);
  if (!reply) return status;
  std::string id = field(reply->o, "run_id");
  if (const json::value* duplicate = reply->o.if_contains("duplicate");
      duplicate && duplicate->is_bool() && duplicate->get_bool())
    std::cerr << "metaharness: request id " << o.request_id << " made run " << id << " already\n";
  // Where the fleet placed it (stderr: stdout stays the id alone, for scripts).
  if (o.fleet) {
    const std::string placement = field(reply->o, "placement");
    std::cerr << "metaharness: run " << id << " "
              << (placement == "placed"    ? "placed on host " + field(reply->o, "host")
                  : placement == "unknown" ? "queued; where it was placed could not be read (" +
                                                 field(reply->o, "placement_error") + "): ask `get` on any host"
                                           : std::string("queued (no host had room yet)"))
              << "\n";
  }
  if (!o.tail_after_submit) {
    std::cout << id << "\n";
    return 0;
  }
  std::cerr << "metaharness: run " << id << "\n";
  Client t;
  if (auto terror = t.connect(o.socket)) {
    std::cerr << "metaharness: " << *terror << "\n";
    return 2;
  }
  json::object tail_fields{{"run_id", id}, {"from_seq", 1}, {"follow", true}};
  if (o.fleet) tail_fields["fleet"] = true;
  t.send(request_line("tail", "tail", tail_fields));
  auto first = t.next();
  if (!first) return 2;
  auto r = parse_reply(*first);
  if (!r || r->reply() != "tailing") return r ? refused(*r) : 2;
  return print_stream(t, human_output(o));
}

int tail_verb(const ClientOptions& o, bool attach) {
  Client c;
  int status = 0;
  json::object fields{{"run_id", o.run_id}};
  if (o.from_seq >= 0) fields["from_seq"] = o.from_seq;
  if (!attach) fields["follow"] = o.follow;
  if (o.fleet && !attach) fields["fleet"] = true;
  auto reply = ask_for(c, o.socket, request_line(attach ? "attach" : "tail", "stream", fields),
                       attach ? "attached" : "tailing", status);
  if (!reply) return status;
  if (!attach) return print_stream(c, human_output(o));
  // Attached: our stdin is the run's command source; its stream is our stdout.
  std::thread forward([&c] {
    std::string line;
    while (std::getline(std::cin, line))
      if (!c.send(line)) break;
  });
  forward.detach();  // reading a terminal cannot be interrupted portably; the process exits
  return print_stream(c, human_output(o));
}

// "12s", "5m", "3h": how long ago, as the human table says it.
std::string age_text(std::int64_t age_s) {
  return age_s < 120    ? std::to_string(age_s) + "s"
         : age_s < 7200 ? std::to_string(age_s / 60) + "m"
                        : std::to_string(age_s / 3600) + "h";
}

// How long ago an RFC 3339 UTC instant of a run summary was ("2026-12-06T18:40:05.123Z"), or the
// text as sent when it is not one this client can read (shown, not dropped).
std::string ago_text(const std::string& at) {
  std::tm tm{};
  char zone = 0;
  double seconds = 0;
  if (std::sscanf(at.c_str(), "%4d-%2d-%2dT%2d:%2d:%lf%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &seconds, &zone) != 7 ||
      zone != 'Z')
    return at;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  tm.tm_sec = static_cast<int>(seconds);
  const std::time_t then = ::timegm(&tm);
  const std::time_t now = std::time(nullptr);
  return age_text(then <= now ? static_cast<std::int64_t>(now - then) : 0);
}

// The PROGRESS column (issue 27 §2): "stalled 45s" (named RUN_STALLED that long ago, still
// silent), "waiting 3m" (its oldest call has waited on a decision that long: no stall), else "-".
std::string progress_text(const json::object& r) {
  for (auto [key, word] :
       {std::pair{"stalled_since", "stalled "}, std::pair{"waiting_on_decision_since", "waiting "}}) {
    const json::value* at = r.if_contains(key);
    if (at && at->is_string()) return word + ago_text(std::string(at->get_string()));
  }
  return "-";
}

int ls_verb(const ClientOptions& o) {
  Client c;
  int status = 0;
  json::object fields;
  if (o.fleet) fields["fleet"] = true;
  auto reply = ask_for(c, o.socket, request_line("list", "ls", fields), "runs", status);
  if (!reply) return status;
  const json::value* hosts = reply->o.if_contains("hosts");
  const json::array no_hosts;
  const json::array& live = hosts && hosts->is_array() ? hosts->get_array() : no_hosts;
  if (o.json_out || (!o.human_out && !stdout_is_terminal())) {
    // The fleet's answer is two lists, the runs and the hosts holding a live lease: both, as the
    // daemon sent them. One host's is its runs alone.
    if (o.fleet) {
      json::object both{{"runs", reply->o.at("runs")}, {"hosts", live}};
      std::cout << protocol::canonical_json(both) << "\n";
    } else {
      std::cout << protocol::canonical_json(reply->o.at("runs")) << "\n";
    }
    return 0;
  }
  if (o.fleet) {  // the fleet's records: which host owns each run, then the hosts alive
    std::printf("%-32s %-8s %-20s %s\n", "RUN", "STATE", "HOST", "CLOSED BY");
    for (const auto& run : reply->o.at("runs").as_array()) {
      const auto& r = run.as_object();
      std::printf("%-32s %-8s %-20s %s\n", field(r, "run_id").c_str(), field(r, "state").c_str(),
                  field(r, "host").c_str(), field(r, "closed_by").c_str());
    }
    std::string names;
    for (const auto& h : live)
      if (h.is_string()) names += (names.empty() ? "" : " ") + std::string(h.get_string());
    std::printf("\nHOSTS WITH A LIVE LEASE: %s\n", names.empty() ? "none" : names.c_str());
    return 0;
  }
  std::printf("%-32s %-8s %-7s %-7s %10s %7s %-12s %5s %8s  %s\n", "RUN", "STATE", "ADAPTER", "NETWORK", "AGE",
              "PENDING", "PROGRESS", "TURNS", "SEQ", "LABELS");
  for (const auto& run : reply->o.at("runs").as_array()) {
    const auto& r = run.as_object();
    std::string age = age_text(r.at("age_ms").to_number<std::int64_t>() / 1000);
    std::string state = field(r, "state");
    if (state == "closed" && !field(r, "close_reason").empty()) state = field(r, "close_reason");
    std::string network = field(r, "network");  // "-" when not known (a run found on disk)
    std::printf("%-32s %-8s %-7s %-7s %10s %7s %-12s %5s %8s  %s\n", field(r, "run_id").c_str(), state.c_str(),
                field(r, "adapter").c_str(), network.empty() || network == "null" ? "-" : network.c_str(), age.c_str(),
                field(r, "pending_decisions").c_str(), progress_text(r).c_str(), field(r, "turns").c_str(),
                field(r, "last_seq").c_str(), field(r, "labels").c_str());
  }
  return 0;
}

int status_verb(const ClientOptions& o) {
  Client c;
  int status = 0;
  auto reply = ask_for(c, o.socket, request_line("status", "status"), "status", status);
  if (!reply) return status;
  std::cout << (o.json_out ? protocol::canonical_json(reply->o) : protocol::pretty_json(reply->o, false));
  if (o.json_out) std::cout << "\n";
  return 0;
}

namespace {

// A dollar figure for a person: six decimals at most, trailing zeros dropped (a sum of prices
// carries float residue: 0.0010499999999999997 is $0.00105). Null or absent: "null".
std::string dollars(const json::value* v) {
  if (!v || v->is_null()) return "null";
  if (!v->is_number()) return protocol::canonical_json(*v);
  char text[64];
  std::snprintf(text, sizeof text, "%.6f", v->to_number<double>());
  std::string out(text);
  while (out.back() == '0')
    out.pop_back();
  if (out.back() == '.') out.pop_back();
  return out == "-0" ? "0" : out;
}

}  // namespace

// Each owner's spend today against the daemon's daily budgets (docs/cli.md): one line per uid, or
// the reply as JSON.
int budget_verb(const ClientOptions& o) {
  Client c;
  int status = 0;
  auto reply = ask_for(c, o.socket, request_line("budget", "budget"), "budget", status);
  if (!reply) return status;
  if (o.json_out) {
    std::cout << protocol::canonical_json(reply->o) << "\n";
    return 0;
  }
  const json::value* metered = reply->o.if_contains("metered");
  if (!metered || !metered->is_bool() || !metered->get_bool()) {
    std::cout << "no daily budget is configured ([budgets.daily]): the daemon does not meter spend per day\n";
    return 0;
  }
  std::cout << "day " << field(reply->o, "day") << " (UTC); daily budgets " << field(reply->o, "daily") << "\n";
  std::printf("%-10s %14s %14s %12s %s\n", "UID", "INPUT_TOKENS", "OUTPUT_TOKENS", "USD", "RESERVED");
  const json::value* owners = reply->o.if_contains("owners");
  std::size_t shown = 0;
  if (owners && owners->is_array())
    for (const auto& owner : owners->get_array()) {
      if (!owner.is_object()) continue;
      const auto& w = owner.get_object();
      std::string usd = dollars(w.if_contains("usd")), reserved = "-";
      if (const json::value* r = w.if_contains("reserved"); r && r->is_object())
        reserved = dollars(r->get_object().if_contains("usd")) + " usd in " + field(r->get_object(), "requests") +
                   " request(s)";
      std::printf("%-10s %14s %14s %12s %s\n", field(w, "uid").c_str(), field(w, "input_tokens").c_str(),
                  field(w, "output_tokens").c_str(), usd == "null" || usd.empty() ? "unpriced" : usd.c_str(),
                  reserved.c_str());
      ++shown;
    }
  if (shown == 0) std::cout << "nothing spent today\n";
  return 0;
}

// A token for the viewer page, and the page's address carrying it (docs/viewer.md).
int viewer_verb(const ClientOptions& o) {
  json::object fields;
  if (!o.role.empty()) fields["role"] = o.role;
  if (o.ttl_s > 0) fields["ttl_s"] = o.ttl_s;
  Client c;
  int status = 0;
  auto reply = ask_for(c, o.socket, request_line("viewer", "viewer", fields), "viewer", status);
  if (!reply) return status;
  if (o.json_out) {
    std::cout << protocol::canonical_json(reply->o) << "\n";
    return 0;
  }
  std::cout << field(reply->o, "url") << "\n";
  std::cerr << "metaharness viewer: a page with the role " << field(reply->o, "role") << " until "
            << field(reply->o, "expires_at") << "; the address carries its token: share it as you would the role\n";
  return 0;
}

// A command's `result` reply, printed; exit status 0 when it was taken, 1 when refused.
int print_result(const ReplyView& reply) {
  std::cout << protocol::canonical_json(reply.o) << "\n";
  const auto& outcome = reply.o.at("outcome").as_object();
  return outcome.at("result") == "ok" ? 0 : 1;
}

int halt_verb(const ClientOptions& o) {
  Client c;
  int status = 0;
  json::object fields{{"run_id", o.run_id}};
  if (!o.reason.empty()) fields["reason"] = o.reason;
  auto reply = ask_for(c, o.socket, request_line("halt", "halt", fields), "result", status);
  if (!reply) return status;
  return print_result(*reply);
}

int decide_verb(const ClientOptions& o) {
  json::object decision{{"decision", o.decision}};
  if (o.decision == "deny") decision["reason"] = o.reason;
  if (o.decision == "replace") {
    if (o.input.empty()) {
      std::cerr << "metaharness decide: replace needs --input (the JSON input to run instead)\n";
      return 2;
    }
    std::string error;
    auto input = protocol::parse_json(o.input, &error);
    if (!input) {
      std::cerr << "metaharness decide: --input is not JSON: " << error << "\n";
      return 2;
    }
    decision["input"] = *input;
  }
  // What the daemon would refuse (a deny with no reason, or one of blanks: the model is told
  // nothing it can act on) is a usage error here, before anything is sent.
  std::string refused;
  if (!protocol::read_decision(json::value(decision), refused)) {
    std::cerr << "metaharness decide: " << refused
              << (o.decision == "deny" ? " (give it with --reason: what the model is told)" : "") << "\n";
    return 2;
  }
  std::string id = o.command_id.empty() ? "decide-" + std::to_string(::getpid()) : o.command_id;
  json::object command{{"format", "metaharness.command/1"},
                       {"id", id},
                       {"command", "tool.decide"},
                       {"call_id", o.call_id},
                       {"decision", decision}};
  Client c;
  int status = 0;
  auto reply =
      ask_for(c, o.socket, request_line("command", "decide", json::object{{"run_id", o.run_id}, {"command", command}}),
              "result", status);
  if (!reply) return status;
  return print_result(*reply);
}

int daemon_verb(const ClientOptions& o) {
  auto config =
      daemon::load_config(o.config_file.empty() ? std::nullopt : std::optional<std::filesystem::path>(o.config_file));
  if (!config) {
    std::cerr << "<3>metaharness: refusing to start: " << config.error() << "\n";
    return 2;
  }
  if (!o.socket_override.empty()) config->socket = o.socket_override;
  if (!o.state_dir_override.empty()) config->state_dir = o.state_dir_override;
  daemon::Daemon d(std::move(*config), &daemon::FleetHost::start);
  return d.run();
}

}  // namespace

void register_daemon_verbs(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<ClientOptions>();
  auto socket_option = [o](CLI::App* sub) {
    sub->add_option("--socket", o->socket,
                    "the daemon's socket (default: $METAHARNESS_SOCKET, else the daemon's default)");
  };

  auto* d = app.add_subcommand("daemon", "Run the daemon: many governed runs over a Unix socket (docs/socket-api.md)");
  d->add_option("--config", o->config_file, "TOML config (config/metaharness.toml documents every key)");
  d->add_option("--socket", o->socket_override, "listen here instead of the configured socket");
  d->add_option("--state-dir", o->state_dir_override, "keep runs here instead of the configured state_dir");
  d->callback([&ctx, o] { ctx.exit_code = daemon_verb(*o); });

  auto* submit = app.add_subcommand("submit", "Submit a run to the daemon; prints its id (or --tail it)");
  add_run_spec_options(submit, o->spec);
  socket_option(submit);
  submit->add_flag("--tail", o->tail_after_submit, "then follow its stream");
  submit->add_flag("--fleet", o->fleet, "queue it for whichever host of the fleet has room ([fleet])");
  submit->add_option("--request-id", o->request_id,
                     "1-128 of [A-Za-z0-9._:-]: a retry with the same id and spec gets the first run, never a second");
  submit->add_flag("--json", o->json_out, "with --tail: raw event lines");
  submit->callback([&ctx, o] { ctx.exit_code = submit_verb(*o); });

  auto* attach = app.add_subcommand(
      "attach", "Attach as the run's controller: events out (pending decisions first), commands in from stdin");
  attach->add_option("RUN", o->run_id, "run id")->required();
  attach->add_option("--from", o->from_seq, "replay from this seq (default 1; 0: only what comes next)")
      ->check(CLI::NonNegativeNumber);
  attach->add_flag("--json", o->json_out, "raw lines even on a terminal");
  socket_option(attach);
  attach->callback([&ctx, o] { ctx.exit_code = tail_verb(*o, true); });

  auto* tail =
      app.add_subcommand("tail", "Read a run's stream: one readable line per event on a terminal, raw JSON otherwise");
  tail->add_option("RUN", o->run_id, "run id")->required();
  tail->add_flag("-f,--follow", o->follow, "keep following until stream.closed");
  tail->add_option("--from", o->from_seq, "start at this seq (default 1; 0: the end)")->check(CLI::NonNegativeNumber);
  tail->add_flag("--json", o->json_out, "raw event lines");
  tail->add_flag("--human", o->human_out, "readable lines even when not on a terminal");
  tail->add_flag("--fleet", o->fleet, "read it from the fleet (a run on any host), byte for byte the owner's");
  socket_option(tail);
  tail->callback([&ctx, o] { ctx.exit_code = tail_verb(*o, false); });

  auto* ls = app.add_subcommand("ls", "List runs: state, adapter, age, pending decisions");
  ls->add_flag("--json", o->json_out, "raw JSON");
  ls->add_flag("--human", o->human_out, "the table even when not on a terminal");
  ls->add_flag("--fleet", o->fleet, "every run of the fleet, with its host");
  socket_option(ls);
  ls->callback([&ctx, o] { ctx.exit_code = ls_verb(*o); });

  auto* halt = app.add_subcommand("halt", "Halt a run (interrupt, end the session, kill what is left)");
  halt->add_option("RUN", o->run_id, "run id")->required();
  halt->add_option("--reason", o->reason, "why");
  socket_option(halt);
  halt->callback([&ctx, o] { ctx.exit_code = halt_verb(*o); });

  auto* decide = app.add_subcommand("decide", "Decide one pending tool call (exit 0 when taken, 1 when refused)");
  decide->add_option("RUN", o->run_id, "run id")->required();
  decide->add_option("CALL", o->call_id, "call id")->required();
  decide->add_option("DECISION", o->decision, "allow, deny, replace or abstain")
      ->required()
      ->check(CLI::IsMember({"allow", "deny", "replace", "abstain"}));
  decide->add_option("--reason", o->reason, "deny: what the model is told (required for deny)");
  decide->add_option("--input", o->input, "replace: the JSON input to run instead");
  decide->add_option("--id", o->command_id, "the command id (default decide-<pid>)");
  socket_option(decide);
  decide->callback([&ctx, o] { ctx.exit_code = decide_verb(*o); });

  auto* status = app.add_subcommand("status", "The daemon's status: runs active, idle and closed, pending decisions");
  status->add_flag("--json", o->json_out, "compact JSON");
  socket_option(status);
  status->callback([&ctx, o] { ctx.exit_code = status_verb(*o); });

  auto* budget = app.add_subcommand(
      "budget", "Each uid's spend today (UTC) against the daemon's daily budgets ([budgets.daily]), and reservations");
  budget->add_flag("--json", o->json_out, "compact JSON");
  socket_option(budget);
  budget->callback([&ctx, o] { ctx.exit_code = budget_verb(*o); });

  auto* viewer = app.add_subcommand(
      "viewer", "Print the address of the viewer page (runs, streams, approvals in a browser), with a token for it");
  viewer->add_option("--role", o->role, "the page's role: observe, control or admin (default: yours; never more)")
      ->check(CLI::IsMember({"observe", "control", "admin"}));
  viewer->add_option("--ttl", o->ttl_s, "seconds the token lives (default 43200: 12 h; at most 7 days)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{7 * 24 * 3600}));
  viewer->add_flag("--json", o->json_out, "the daemon's reply: token, role, expires_at, url");
  socket_option(viewer);
  viewer->callback([&ctx, o] { ctx.exit_code = viewer_verb(*o); });
}

}  // namespace mh::cli
