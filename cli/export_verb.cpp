// `metaharness export --format atif RUN [--out FILE] [--socket PATH]`: a run as one ATIF
// trajectory (docs/atif.md). RUN is a run directory (events.jsonl, and spec.json for the prompt),
// an events.jsonl, or a run id on the daemon, read over the socket with `get` and `tail` as
// `metaharness tail` reads it. Exit 0 written, 1 the daemon refused, 2 cannot read (or write).
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <cstring>
#include <fstream>
#include <iostream>

#include "cli/atif_trajectory.hpp"
#include "cli/socket_client.hpp"
#include "cli/verbs.hpp"
#include "daemon/config/config.hpp"
#include "daemon/server/socket_api.hpp"
#include "protocol/reader.hpp"

namespace mh::cli {

namespace {

namespace asio = boost::asio;
namespace json = boost::json;

struct Failure {
  int status;
  std::string message;
};

struct Stream {
  std::vector<protocol::Event> events;
  json::value spec = nullptr;
  std::string source;
};

using Read = boost::system::result<Stream, Failure>;

Read fail(int status, std::string message) {
  return Read(boost::system::in_place_error, Failure{status, std::move(message)});
}

// Every complete line is an event or the export is refused, naming the line: a stream we cannot
// read whole is not exported in part. A last line with no newline is a write still under way
// (a live run) and is not an event yet.
std::optional<std::string> parse_lines(std::string_view text, std::vector<protocol::Event>& out,
                                       std::size_t& torn_bytes) {
  std::size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      torn_bytes = text.size() - pos;
      break;
    }
    ++line_no;
    auto event = protocol::read_event_line(text.substr(pos, nl - pos));
    if (!event)
      return "line " + std::to_string(line_no) + " is not an event (" +
             std::string(protocol::to_string(event.error().kind)) + "): " + event.error().message;
    out.push_back(std::move(*event));
    pos = nl + 1;
  }
  return std::nullopt;
}

std::optional<std::string> slurp(const std::filesystem::path& p, std::string& out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return "cannot open " + p.string() + ": " + std::strerror(errno);
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) return "reading " + p.string() + " failed";
  return std::nullopt;
}

Read from_path(const std::filesystem::path& path) {
  std::error_code ec;
  Stream s;
  std::filesystem::path events = path;
  if (std::filesystem::is_directory(path, ec)) {
    events = path / "events.jsonl";
    if (!std::filesystem::is_regular_file(events, ec))
      return fail(2, path.string() + " is not a run directory: it holds no events.jsonl");
    s.source = "run_dir";
    std::string spec;
    if (std::filesystem::exists(path / "spec.json", ec)) {
      if (auto error = slurp(path / "spec.json", spec)) return fail(2, *error);
      std::string parse_error;
      auto v = protocol::parse_json(spec, &parse_error);
      if (!v) return fail(2, (path / "spec.json").string() + " is not JSON: " + parse_error);
      s.spec = std::move(*v);
    }
  } else if (std::filesystem::is_regular_file(path, ec)) {
    s.source = "events_file";
  } else {
    return fail(2, "cannot read " + path.string() + ": neither a run directory nor an events.jsonl");
  }
  std::string text;
  if (auto error = slurp(events, text)) return fail(2, *error);
  std::size_t torn = 0;
  if (auto error = parse_lines(text, s.events, torn)) return fail(2, events.string() + ": " + *error);
  if (torn > 0)
    std::cerr << "metaharness export: " << events.string() << " ends in " << torn
              << " bytes with no newline (a line still being written): not exported\n";
  return s;
}

using Connection = SocketClient;

std::string text_of(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : "";
}

Read refused(const json::object& reply) {
  return fail(1, "refused (" + text_of(reply, "code") + "): " + text_of(reply, "reason"));
}

// One request, its first reply.
boost::system::result<json::object, Failure> ask(Connection& c, const std::string& socket, const std::string& line) {
  using R = boost::system::result<json::object, Failure>;
  if (auto error = c.connect(socket)) return R(boost::system::in_place_error, Failure{2, *error});
  if (!c.send(line)) return R(boost::system::in_place_error, Failure{2, "the daemon closed the connection"});
  auto reply_line = c.next();
  if (!reply_line)
    return R(boost::system::in_place_error, Failure{2, "the daemon closed the connection without answering"});
  auto reply = socket_reply(*reply_line);
  if (!reply) return R(boost::system::in_place_error, Failure{2, "unreadable reply: " + *reply_line});
  return *reply;
}

Read from_daemon(const std::string& run_id, const std::string& socket) {
  Stream s;
  s.source = "daemon";
  {
    Connection c;
    auto reply = ask(c, socket, daemon::request_line("get", "export", json::object{{"run_id", run_id}}));
    if (!reply) return fail(reply.error().status, reply.error().message);
    if (text_of(*reply, "reply") != "run") return refused(*reply);
    if (const auto* spec = reply->if_contains("spec")) s.spec = *spec;
  }
  Connection c;
  auto reply =
      ask(c, socket,
          daemon::request_line("tail", "export", json::object{{"run_id", run_id}, {"from_seq", 1}, {"follow", false}}));
  if (!reply) return fail(reply.error().status, reply.error().message);
  if (text_of(*reply, "reply") != "tailing") return refused(*reply);
  std::uint64_t line_no = 0;
  while (auto line = c.next()) {
    if (auto r = socket_reply(*line)) {
      if (text_of(*r, "reply") == "end") return s;
      if (text_of(*r, "reply") == "refused") return refused(*r);
      continue;
    }
    ++line_no;
    auto event = protocol::read_event_line(*line);
    if (!event)
      return fail(2, "event line " + std::to_string(line_no) + " of run " + run_id +
                         " is not an event: " + event.error().message);
    s.events.push_back(std::move(*event));
  }
  return fail(2, "the daemon closed the stream of run " + run_id + " before its end");
}

// Written whole or not at all: a reader of FILE never sees half a trajectory.
std::optional<std::string> write_out(const std::string& out, const std::string& text) {
  if (out.empty() || out == "-") {
    std::cout << text;
    std::cout.flush();
    return std::cout ? std::nullopt : std::optional<std::string>("cannot write to stdout");
  }
  std::filesystem::path target(out);
  std::filesystem::path temp = target;
  temp += ".partial";
  {
    std::ofstream f(temp, std::ios::binary | std::ios::trunc);
    if (!f) return "cannot write " + temp.string() + ": " + std::strerror(errno);
    f << text;
    f.flush();
    if (!f) return "writing " + temp.string() + " failed";
  }
  std::error_code ec;
  std::filesystem::rename(temp, target, ec);
  if (ec) return "cannot rename " + temp.string() + " to " + target.string() + ": " + ec.message();
  return std::nullopt;
}

struct Options {
  std::string format;
  std::string run;
  std::string out;
  std::string socket = daemon::default_socket_path().string();
};

int export_verb(const Options& o) {
  if (o.format != "atif") {
    std::cerr << "metaharness export: "
              << (o.format.empty() ? std::string("--format is required") : "unknown format \"" + o.format + "\"")
              << ": the one format is atif (an ATIF trajectory, docs/atif.md)\n";
    return 2;
  }
  // A run id has no '/': anything else, or anything that exists here, is a path.
  std::error_code ec;
  bool path = o.run.find('/') != std::string::npos || std::filesystem::exists(o.run, ec);
  Read read = path ? from_path(o.run) : from_daemon(o.run, o.socket);
  if (!read) {
    std::cerr << "metaharness export: " << read.error().message << "\n";
    return read.error().status;
  }
  atif::Context ctx;
  ctx.spec = std::move(read->spec);
  ctx.source = read->source;
  json::object doc = atif::trajectory(read->events, ctx);
  const auto& stream = doc.at("extra").at("metaharness").at("stream").as_object();
  if (stream.at("status") != "complete")
    std::cerr << "metaharness export: the stream is " << stream.at("status").as_string()
              << " (no single final stream.closed): the trajectory ends where the stream does\n";
  if (auto error = write_out(o.out, protocol::pretty_json(doc, false))) {
    std::cerr << "metaharness export: " << *error << "\n";
    return 2;
  }
  return 0;
}

}  // namespace

void register_export_verb(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<Options>();
  auto* e = app.add_subcommand("export",
                               "Write a run as an ATIF trajectory (Harbor's Agent Trajectory Interchange Format, "
                               "docs/atif.md). Exit status: 0 written, 1 the daemon refused, 2 cannot read");
  e->add_option("--format", o->format, "atif (the one format)");
  e->add_option("RUN", o->run, "a run directory, an events.jsonl, or a run id on the daemon")->required();
  e->add_option("--out", o->out, "write here (whole or not at all) instead of stdout");
  e->add_option("--socket", o->socket, "the daemon's socket (default: $METAHARNESS_SOCKET, else the daemon's default)");
  e->callback([&ctx, o] { ctx.exit_code = export_verb(*o); });
}

}  // namespace mh::cli
