// The daemon <-> supervisor wire: messages written with the project's one JSON writer (fields in
// a fixed order, compact) and read with its strict field reader (a refusal names the field).
#include "daemon/supervisor/supervisor_protocol.hpp"

#include <array>
#include <limits>

#include "protocol/json.hpp"

namespace mh::supervisor {

namespace json = boost::json;
using protocol::FieldReader;
using protocol::JsonWriter;

namespace {

// ---- writing ----------------------------------------------------------------------------------

// Each message's "t", in the order of its variant's alternatives.
constexpr std::array<std::string_view, std::variant_size_v<ToSupervisor>> kToKinds = {
    "attach", "in", "close_stdin", "hook_reply", "release", "reserved", "respawn"};
constexpr std::array<std::string_view, std::variant_size_v<FromSupervisor>> kFromKinds = {
    "hello",   "out",     "out_end",       "err_end",         "exited", "hook",     "hook_gone",
    "refused", "reserve", "gateway_usage", "gateway_refused", "egress", "respawned"};

void write_termination(JsonWriter& w, const protocol::ProcessTermination& termination) {
  protocol::write(w, termination);
}

void write_hook(JsonWriter& w, const Hook& hook) {
  w.key("connection");
  w.uinteger(hook.connection);
  w.field("line", hook.line);
}

// The fields after "t"; a message without fields has none.
struct ToWriter {
  JsonWriter& w;
  void operator()(const Attach& m) {
    w.field_u64("protocol", m.protocol);
    w.field_u64("carry_out_bytes", m.carry_out_bytes);
  }
  void operator()(const In& m) { w.field("line", m.line); }
  void operator()(const HookReply& m) {
    w.key("connection");
    w.uinteger(m.connection);
    w.field("line", m.line);
  }
  void operator()(const CloseStdin&) {}
  void operator()(const Release&) {}
  void operator()(const Reserved& m) {
    w.field_u64("request", m.request);
    w.field_bool("allowed", m.allowed);
    if (!m.reason.empty()) w.field("reason", m.reason);
  }
  void operator()(const Respawn& m) {
    w.key("extra_args");
    w.begin_array();
    for (const std::string& arg : m.extra_args)
      w.string(arg);
    w.end_array();
  }
};

struct FromWriter {
  JsonWriter& w;
  void operator()(const Hello& m) {
    w.key("protocol");
    w.uinteger(m.protocol);
    w.field("version", m.version);
    w.field_i64("supervisor_pid", m.supervisor_pid);
    w.field_i64("vendor_pid", m.vendor_pid ? std::optional<std::int64_t>(*m.vendor_pid) : std::nullopt);
    w.field("spawn_error", m.spawn_error);
    w.field_u64("stdout_bytes", m.stdout_bytes);
    w.field_bool("stdout_ended", m.stdout_ended);
    w.field_bool("stderr_ended", m.stderr_ended);
    w.field_u64("stdin_bytes", m.stdin_bytes);
    w.field_bool("stdin_closed", m.stdin_closed);
    w.key("exited");
    if (m.exited)
      write_termination(w, *m.exited);
    else
      w.null();
    w.key("hooks_open");
    w.begin_array();
    for (const Hook& hook : m.hooks_open) {
      w.begin_object();
      write_hook(w, hook);
      w.end_object();
    }
    w.end_array();
    w.key("hooks_gone");
    w.begin_array();
    for (std::uint64_t id : m.hooks_gone)
      w.uinteger(id);
    w.end_array();
    w.field_u64("carry_out_bytes", m.carry_out_bytes);
    if (m.ungoverned_ms) w.field_u64("ungoverned_ms", *m.ungoverned_ms);
    if (m.can_respawn) w.field_bool("respawn", true);
  }
  void operator()(const Out& m) {
    w.field_u64("bytes", m.bytes);
    if (!m.data.empty()) w.field_u64("carried", m.data.size());
  }
  void operator()(const OutEnd& m) { w.field_u64("bytes", m.bytes); }
  void operator()(const Exited& m) {
    w.key("termination");
    write_termination(w, m.termination);
  }
  void operator()(const Hook& m) { write_hook(w, m); }
  void operator()(const HookGone& m) { w.field_u64("connection", m.connection); }
  void operator()(const Refused& m) { w.field("why", m.why); }
  void operator()(const ErrEnd&) {}
  void operator()(const Reserve& m) {
    w.field_u64("request", m.request);
    w.field("model", m.model);
    w.field_u64("max_tokens", m.max_tokens);
    w.field_u64("input_bytes", m.input_bytes);
  }
  void operator()(const GatewayUsage& m) {
    w.field_u64("request", m.request);
    w.field_i64("status", m.status);
    w.field("model", m.model);
    w.field_u64("input_tokens", m.input_tokens);
    w.field_u64("output_tokens", m.output_tokens);
    w.field_u64("cache_read_tokens", m.cache_read_tokens);
    w.field_u64("cache_creation_tokens", m.cache_creation_tokens);
    w.field_bool("complete", m.complete);
    if (!m.failure.empty()) w.field("failure", m.failure);
  }
  void operator()(const GatewayRefused& m) {
    w.field("method", m.method);
    w.field("path", m.path);
  }
  void operator()(const Egress& m) {
    w.field("destination", m.destination);
    w.field_bool("allowed", m.allowed);
    if (!m.why.empty()) w.field("why", m.why);
  }
  void operator()(const Respawned& m) {
    w.field_i64("vendor_pid", m.vendor_pid ? std::optional<std::int64_t>(*m.vendor_pid) : std::nullopt);
    w.field("spawn_error", m.spawn_error);
  }
};

template <class Writer, class Message, std::size_t N>
std::string write_line(const Message& message, const std::array<std::string_view, N>& kinds) {
  std::string out;
  JsonWriter w(out);
  w.begin_object();
  w.field("t", kinds[message.index()]);
  std::visit(Writer{w}, message);
  w.end_object();
  out.push_back('\n');
  return out;
}

// ---- reading ----------------------------------------------------------------------------------

std::string size_text(std::size_t bytes) {
  return bytes % (1u << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + " bytes";
}

// The object of a line and its kind, or a refusal.
struct Envelope {
  json::value value;
  std::string t;
};

boost::system::result<Envelope, std::string> open_line(std::string_view line, std::size_t bound) {
  if (line.size() > bound) return refuse_oversized(line.size(), bound);
  std::string error;
  auto value = protocol::parse_json(line, &error);
  if (!value) return "the line is not JSON: " + error;
  if (!value->is_object()) return "the line is " + protocol::describe_json(*value) + ", expected an object";
  const json::value* t = value->get_object().if_contains("t");
  if (!t) return std::string("the message has no \"t\"");
  if (!t->is_string()) return "field \"t\" is " + protocol::describe_json(*t) + ", expected a string";
  std::string kind(t->get_string());
  return Envelope{std::move(*value), std::move(kind)};
}

std::optional<protocol::ProcessTermination> read_termination(const json::object& o, FieldReader& outer,
                                                             std::string_view key) {
  FieldReader f(o, std::string(key));
  protocol::ProcessTermination termination;
  std::string kind = f.req_string("kind");
  if (f.ok()) {
    auto parsed = protocol::parse_enum<protocol::ProcessKind>(kind);
    if (!parsed) f.fail("field \"kind\" is \"" + protocol::excerpt(kind, 40) + "\", expected exited|signaled|unknown");
    if (parsed) termination.kind = *parsed;
  }
  auto int_field = [&](std::string_view name) -> int {
    auto v = f.opt_i64(name);
    if (!v) {
      f.fail("missing required field \"" + std::string(name) + "\"");
      return 0;
    }
    if (*v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max()) {
      f.fail("field \"" + std::string(name) + "\" is out of range");
      return 0;
    }
    return static_cast<int>(*v);
  };
  if (f.ok() && termination.kind == protocol::ProcessKind::exited) termination.code = int_field("code");
  if (f.ok() && termination.kind == protocol::ProcessKind::signaled) termination.signal = int_field("signal");
  if (!f.ok()) {
    outer.fail(f.error());
    return std::nullopt;
  }
  return termination;
}

std::optional<std::int32_t> to_pid(std::optional<std::int64_t> v, FieldReader& f, std::string_view name) {
  if (!v) return std::nullopt;
  if (*v <= 0 || *v > std::numeric_limits<std::int32_t>::max()) {
    f.fail("field \"" + std::string(name) + "\" is not a process id");
    return std::nullopt;
  }
  return static_cast<std::int32_t>(*v);
}

Hello read_hello(FieldReader& f) {
  Hello m;
  m.protocol = f.req_u32("protocol");
  m.version = f.req_string("version");
  m.supervisor_pid = to_pid(f.opt_i64("supervisor_pid"), f, "supervisor_pid").value_or(0);
  if (f.ok() && m.supervisor_pid == 0) f.fail("missing required field \"supervisor_pid\"");
  m.vendor_pid = to_pid(f.opt_i64("vendor_pid"), f, "vendor_pid");
  m.spawn_error = f.opt_string("spawn_error");
  m.stdout_bytes = f.req_u64("stdout_bytes");
  m.stdout_ended = f.req_bool("stdout_ended");
  m.stderr_ended = f.req_bool("stderr_ended");
  m.stdin_bytes = f.req_u64("stdin_bytes");
  m.stdin_closed = f.req_bool("stdin_closed");
  if (const json::object* exited = f.opt_object("exited")) m.exited = read_termination(*exited, f, "exited");
  if (const json::array* open = f.req_array("hooks_open")) {
    for (const json::value& v : *open) {
      if (!v.is_object()) {
        f.fail("an entry of \"hooks_open\" is " + protocol::describe_json(v) + ", expected an object");
        break;
      }
      FieldReader h(v.get_object(), "hooks_open");
      Hook hook{h.req_u64("connection"), h.req_string("line")};
      if (!h.ok()) {
        f.fail(h.error());
        break;
      }
      m.hooks_open.push_back(std::move(hook));
    }
  }
  if (const json::array* gone = f.req_array("hooks_gone")) {
    for (const json::value& v : *gone) {
      auto id = protocol::as_u64(v);
      if (!id) {
        f.fail("an entry of \"hooks_gone\" is " + protocol::describe_json(v) + ", expected a connection id");
        break;
      }
      m.hooks_gone.push_back(*id);
    }
  }
  m.carry_out_bytes = f.opt_u64("carry_out_bytes").value_or(0);
  m.ungoverned_ms = f.opt_u64("ungoverned_ms");
  m.can_respawn = f.opt_bool("respawn").value_or(false);
  return m;
}

template <class Message>
boost::system::result<std::optional<Message>, std::string> done(FieldReader& f, Message m) {
  if (!f.ok()) return f.error();
  return std::optional<Message>(std::move(m));
}

}  // namespace

std::string serialize(const ToSupervisor& message) {
  return write_line<ToWriter>(message, kToKinds);
}

std::string serialize(const FromSupervisor& message) {
  std::string line = write_line<FromWriter>(message, kFromKinds);
  // The carried bytes are the one thing after a line that is not a line.
  if (const auto* out = std::get_if<Out>(&message)) line.append(out->data);
  return line;
}

std::string refuse_oversized(std::uint64_t length, std::size_t bound) {
  return "a line of at least " + std::to_string(length) + " bytes, over the " + size_text(bound) + " bound";
}

ParsedToSupervisor parse_to_supervisor(std::string_view line) {
  auto envelope = open_line(line, kMaxToSupervisorLineBytes);
  if (!envelope) return envelope.error();
  const std::string& t = envelope->t;
  FieldReader f(envelope->value.get_object(), "\"" + protocol::excerpt(t, 40) + "\"");
  if (t == "attach")  // (a braced list is read left to right: the fields in order)
    return done<ToSupervisor>(f, Attach{f.req_u32("protocol"), f.opt_u64("carry_out_bytes").value_or(0)});
  if (t == "in") return done<ToSupervisor>(f, In{f.req_string("line")});
  if (t == "close_stdin") return done<ToSupervisor>(f, CloseStdin{});
  if (t == "hook_reply") {
    HookReply m;
    m.connection = f.req_u64("connection");
    m.line = f.req_string("line");
    return done<ToSupervisor>(f, std::move(m));
  }
  if (t == "release") return done<ToSupervisor>(f, Release{});
  if (t == "reserved") {
    Reserved m;
    m.request = f.req_u64("request");
    m.allowed = f.req_bool("allowed");
    m.reason = f.opt_string("reason").value_or("");
    return done<ToSupervisor>(f, std::move(m));
  }
  if (t == "respawn") {
    Respawn m;
    if (f.req_array("extra_args")) m.extra_args = f.strings_or_empty("extra_args");
    return done<ToSupervisor>(f, std::move(m));
  }
  return std::optional<ToSupervisor>();  // a later daemon's message: ignored
}

ParsedFromSupervisor parse_from_supervisor(std::string_view line) {
  auto envelope = open_line(line, kMaxFromSupervisorLineBytes);
  if (!envelope) return envelope.error();
  const std::string& t = envelope->t;
  FieldReader f(envelope->value.get_object(), "\"" + protocol::excerpt(t, 40) + "\"");
  if (t == "hello") {
    Hello m = read_hello(f);
    return done<FromSupervisor>(f, std::move(m));
  }
  if (t == "out") {
    Out m;
    m.bytes = f.req_u64("bytes");
    m.carried = f.opt_u64("carried").value_or(0);
    return done<FromSupervisor>(f, std::move(m));
  }
  if (t == "out_end") return done<FromSupervisor>(f, OutEnd{f.req_u64("bytes")});
  if (t == "err_end") return done<FromSupervisor>(f, ErrEnd{});
  if (t == "exited") {
    Exited m;
    const json::object* termination = f.req_object("termination");
    if (termination) {
      auto read = read_termination(*termination, f, "termination");
      if (read) m.termination = *read;
    }
    return done<FromSupervisor>(f, m);
  }
  if (t == "hook") {
    Hook m;
    m.connection = f.req_u64("connection");
    m.line = f.req_string("line");
    return done<FromSupervisor>(f, std::move(m));
  }
  if (t == "hook_gone") return done<FromSupervisor>(f, HookGone{f.req_u64("connection")});
  if (t == "refused") return done<FromSupervisor>(f, Refused{f.req_string("why")});
  if (t == "reserve") {
    Reserve m;
    m.request = f.req_u64("request");
    m.model = f.req_string("model");
    m.max_tokens = f.req_u64("max_tokens");
    m.input_bytes = f.req_u64("input_bytes");
    return done<FromSupervisor>(f, std::move(m));
  }
  if (t == "gateway_usage") {
    GatewayUsage m;
    m.request = f.req_u64("request");
    auto status = f.opt_i64("status").value_or(0);
    m.status = status < 0 || status > 999 ? 0 : static_cast<std::int32_t>(status);
    m.model = f.req_string("model");
    m.input_tokens = f.opt_u64("input_tokens");
    m.output_tokens = f.opt_u64("output_tokens");
    m.cache_read_tokens = f.opt_u64("cache_read_tokens");
    m.cache_creation_tokens = f.opt_u64("cache_creation_tokens");
    m.complete = f.req_bool("complete");
    m.failure = protocol::excerpt(f.opt_string("failure").value_or(""), 1024);  // absent: an older supervisor
    return done<FromSupervisor>(f, std::move(m));
  }
  if (t == "gateway_refused")
    return done<FromSupervisor>(f, GatewayRefused{f.req_string("method"), f.req_string("path")});
  if (t == "egress") {
    Egress m;
    m.destination = f.req_string("destination");
    m.allowed = f.req_bool("allowed");
    m.why = f.opt_string("why").value_or("");
    return done<FromSupervisor>(f, std::move(m));
  }
  if (t == "respawned") {
    Respawned m;
    m.vendor_pid = to_pid(f.opt_i64("vendor_pid"), f, "vendor_pid");
    m.spawn_error = f.opt_string("spawn_error");
    if (f.ok() && !m.vendor_pid && !m.spawn_error) f.fail("neither \"vendor_pid\" nor \"spawn_error\"");
    return done<FromSupervisor>(f, std::move(m));
  }
  return std::optional<FromSupervisor>();  // a later supervisor's message: ignored
}

// ---- the daemon's reader ----------------------------------------------------------------------

FromSupervisorReader::FromSupervisorReader(std::size_t max_carried)
    : framer_(kMaxFromSupervisorLineBytes, /*digest_oversized=*/false, /*report_early=*/true),
      max_carried_(max_carried) {}

void FromSupervisorReader::feed(std::string_view chunk, const Sink& sink) {
  while (!chunk.empty() && !lost_) {
    if (payload_of_) {
      std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(payload_left_, chunk.size()));
      if (payload_kept_) payload_of_->data.append(chunk.substr(0, take));
      payload_left_ -= take;
      chunk.remove_prefix(take);
      if (payload_left_ == 0) {
        Out out = std::move(*payload_of_);
        payload_of_.reset();
        sink(std::optional<FromSupervisor>(std::move(out)));
      }
      continue;
    }
    // One line at a time: the line may announce a payload, which is not lines.
    std::size_t nl = chunk.find('\n');
    std::size_t upto = nl == std::string_view::npos ? chunk.size() : nl + 1;
    framer_.feed(chunk.substr(0, upto), [this, &sink](const protocol::FramedLine& line) { on_line(line, sink); });
    chunk.remove_prefix(upto);
  }
}

void FromSupervisorReader::finish(const Sink& sink) {
  if (lost_ || payload_of_) return;
  framer_.finish([this, &sink](const protocol::FramedLine& line) { on_line(line, sink); });
}

void FromSupervisorReader::on_line(const protocol::FramedLine& line, const Sink& sink) {
  if (line.too_long) {
    if (carrying_) lost_ = "an oversized line while bytes are carried: the stream's framing is lost";
    sink(refuse_oversized(line.length, kMaxFromSupervisorLineBytes));
    return;
  }
  auto parsed = parse_from_supervisor(line.text);
  if (!parsed) {
    if (carrying_) lost_ = "a line that cannot be read while bytes are carried: the stream's framing is lost";
    sink(std::move(parsed));
    return;
  }
  if (*parsed) {
    if (auto* hello = std::get_if<Hello>(&**parsed)) carrying_ = hello->carry_out_bytes > 0;
    if (auto* out = std::get_if<Out>(&**parsed); out && out->carried > 0) {
      payload_left_ = out->carried;
      payload_kept_ = carrying_ && out->carried <= max_carried_;
      if (!payload_kept_)
        sink(std::string("an out carried ") + std::to_string(out->carried) + " bytes" +
             (carrying_ ? ", over the " + size_text(max_carried_) + " bound" : " the hello did not agree to") +
             ": passed over, the transcript is read instead");
      out->carried = payload_kept_ ? out->carried : 0;
      if (payload_kept_) out->data.reserve(static_cast<std::size_t>(payload_left_));
      payload_of_ = std::move(*out);
      return;
    }
  }
  sink(std::move(parsed));
}

std::optional<std::string_view> carried_from(const Out& out, std::uint64_t fed) {
  if (out.data.empty() || out.data.size() > out.bytes) return std::nullopt;
  const std::uint64_t from = out.bytes - out.data.size();
  if (fed < from || fed > out.bytes) return std::nullopt;
  return std::string_view(out.data).substr(static_cast<std::size_t>(fed - from));
}

boost::system::result<std::uint32_t, std::string> supervisor_speaks(std::uint32_t daemon_highest) {
  std::uint32_t speak = std::min(daemon_highest, kProtocol);
  if (speak < kOldestProtocol)
    return "this supervisor speaks protocol " + std::to_string(kOldestProtocol) + ".." + std::to_string(kProtocol) +
           ", the daemon at most " + std::to_string(daemon_highest);
  return speak;
}

boost::system::result<std::uint32_t, std::string> daemon_accepts(std::uint32_t hello_protocol) {
  if (hello_protocol < kOldestProtocol || hello_protocol > kProtocol)
    return "supervisor speaks protocol " + std::to_string(hello_protocol) + ", this daemon " +
           std::to_string(kOldestProtocol) + ".." + std::to_string(kProtocol);
  return hello_protocol;
}

}  // namespace mh::supervisor
