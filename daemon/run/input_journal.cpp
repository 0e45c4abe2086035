#include "daemon/run/input_journal.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "protocol/json.hpp"

namespace json = boost::json;

namespace mh::daemon {

namespace journal {

namespace {

namespace json = boost::json;

// The kinds, in variant order: the line's "k".
constexpr std::string_view kKinds[] = {"start",           "out",        "out_end",       "hook",    "hook_gone",
                                       "command",         "unreadable", "source_closed", "budget",  "shutdown",
                                       "deadline",        "idle",       "wall",          "warning", "gateway_usage",
                                       "gateway_refused", "egress",     "stall",         "park",    "resumed"};
static_assert(std::size(kKinds) == std::variant_size_v<Input>);

std::int64_t to_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

void fill(json::object& o, const Start& v) {
  if (v.gateway) o["gateway"] = true;  // absent otherwise: older journals' lines stay as they were
}
void fill(json::object& o, const VendorOut& v) {
  o["to"] = v.to;
  o["at"] = v.received_unix_ms;
}
void fill(json::object&, const VendorEnd&) {}
void fill(json::object& o, const HookRequest& v) {
  o["connection"] = v.connection;
  o["line"] = v.line;
}
void fill(json::object& o, const HookGone& v) {
  o["connection"] = v.connection;
}
void fill(json::object& o, const CommandLine& v) {
  o["line"] = v.line;
  if (v.peer) {
    json::object peer{{"uid", v.peer->uid}, {"pid", v.peer->pid}};
    if (v.peer->via) peer["via"] = *v.peer->via;
    o["peer"] = std::move(peer);
  }
}
void fill(json::object& o, const Unreadable& v) {
  o["refusal"] = to_string(v.refusal.kind);
  o["message"] = v.refusal.message;
  if (v.refusal.id) o["id"] = *v.refusal.id;
}
void fill(json::object&, const SourceClosed&) {}
void fill(json::object& o, const BudgetExhausted& v) {
  o["message"] = v.message;
}
void fill(json::object&, const Shutdown&) {}
void fill(json::object& o, const Deadline& v) {
  o["call_id"] = v.call_id;
}
void fill(json::object&, const IdleTimeout&) {}
void fill(json::object&, const WallBudget&) {}
void fill(json::object&, const StallTimeout&) {}
void fill(json::object& o, const ParkTimeout& v) {
  o["call_id"] = v.call_id;
}
void fill(json::object&, const Resumed&) {}
void fill(json::object& o, const ShellWarning& v) {
  o["code"] = v.code;
  o["message"] = v.message;
}
void fill(json::object& o, const GatewayUsage& v) {
  o["request"] = v.request;
  o["status"] = v.status;
  o["model"] = v.model;
  auto count = [&o](const char* key, const std::optional<std::uint64_t>& n) {
    if (n) o[key] = *n;  // absent: the answer did not say (unknown, not zero)
  };
  count("input_tokens", v.input_tokens);
  count("output_tokens", v.output_tokens);
  count("cache_read_tokens", v.cache_read_tokens);
  count("cache_creation_tokens", v.cache_creation_tokens);
  o["complete"] = v.complete;
}
void fill(json::object& o, const GatewayRefused& v) {
  o["method"] = v.method;
  o["path"] = v.path;
}
void fill(json::object& o, const Egress& v) {
  o["destination"] = v.destination;
  o["allowed"] = v.allowed;
  o["why"] = v.why;
}

// Field readers that refuse by name.
struct Fields {
  const json::object& o;
  std::string error;

  const json::value* need(std::string_view key) {
    const json::value* v = o.if_contains(key);
    if (!v && error.empty()) error = "no \"" + std::string(key) + "\"";
    return v;
  }
  std::string string(std::string_view key) {
    const json::value* v = need(key);
    if (v && v->is_string()) return std::string(v->get_string());
    if (v && error.empty()) error = "\"" + std::string(key) + "\" is not a string";
    return {};
  }
  std::uint64_t u64(std::string_view key) {
    const json::value* v = need(key);
    if (v && v->is_uint64()) return v->get_uint64();
    if (v && v->is_int64() && v->get_int64() >= 0) return static_cast<std::uint64_t>(v->get_int64());
    if (v && error.empty()) error = "\"" + std::string(key) + "\" is not a count";
    return 0;
  }
  std::optional<std::uint64_t> maybe_u64(std::string_view key) {
    if (!o.contains(key)) return std::nullopt;
    return u64(key);
  }
  bool boolean(std::string_view key) {
    const json::value* v = need(key);
    if (v && v->is_bool()) return v->get_bool();
    if (v && error.empty()) error = "\"" + std::string(key) + "\" is not a boolean";
    return false;
  }
  std::int64_t i64(std::string_view key) {
    const json::value* v = need(key);
    if (v && v->is_int64()) return v->get_int64();
    if (v && v->is_uint64() && v->get_uint64() <= static_cast<std::uint64_t>(INT64_MAX))
      return static_cast<std::int64_t>(v->get_uint64());
    if (v && error.empty()) error = "\"" + std::string(key) + "\" is not an integer";
    return 0;
  }
};

std::optional<protocol::LineRefusalKind> refusal_kind(std::string_view name) {
  for (auto kind : {protocol::LineRefusalKind::TooLong, protocol::LineRefusalKind::NotAnObject,
                    protocol::LineRefusalKind::UnknownFormat, protocol::LineRefusalKind::UnknownName,
                    protocol::LineRefusalKind::Malformed})
    if (to_string(kind) == name) return kind;
  return std::nullopt;
}

boost::system::result<Input, std::string> read_input(std::string_view kind, Fields& f) {
  using Result = boost::system::result<Input, std::string>;
  Input input;
  if (kind == "start") {
    input = Start{f.o.contains("gateway") && f.boolean("gateway")};
  } else if (kind == "out") {
    input = VendorOut{f.u64("to"), f.i64("at")};
  } else if (kind == "out_end") {
    input = VendorEnd{};
  } else if (kind == "hook") {
    input = HookRequest{f.u64("connection"), f.string("line")};
  } else if (kind == "hook_gone") {
    input = HookGone{f.u64("connection")};
  } else if (kind == "command") {
    CommandLine c{f.string("line"), std::nullopt};
    if (const json::value* peer = f.o.if_contains("peer"); peer && peer->is_object()) {
      Fields p{peer->get_object(), {}};
      protocol::PeerIdentity identity;
      identity.uid = static_cast<std::uint32_t>(p.u64("uid"));
      identity.pid = static_cast<std::int32_t>(p.i64("pid"));
      if (peer->get_object().contains("via")) identity.via = p.string("via");
      if (!p.error.empty()) f.error = "peer: " + p.error;
      c.peer = identity;
    }
    input = std::move(c);
  } else if (kind == "unreadable") {
    auto name = f.string("refusal");
    auto parsed = refusal_kind(name);
    if (!parsed && f.error.empty()) f.error = "unknown refusal kind \"" + name + "\"";
    protocol::LineRefusal refusal{parsed.value_or(protocol::LineRefusalKind::Malformed), f.string("message"),
                                  std::nullopt};
    if (f.o.contains("id")) refusal.id = f.string("id");
    input = Unreadable{std::move(refusal)};
  } else if (kind == "source_closed") {
    input = SourceClosed{};
  } else if (kind == "budget") {
    input = BudgetExhausted{f.string("message")};
  } else if (kind == "shutdown") {
    input = Shutdown{};
  } else if (kind == "deadline") {
    input = Deadline{f.string("call_id")};
  } else if (kind == "idle") {
    input = IdleTimeout{};
  } else if (kind == "wall") {
    input = WallBudget{};
  } else if (kind == "stall") {
    input = StallTimeout{};
  } else if (kind == "park") {
    input = ParkTimeout{f.string("call_id")};
  } else if (kind == "resumed") {
    input = Resumed{};
  } else if (kind == "warning") {
    input = ShellWarning{f.string("code"), f.string("message")};
  } else if (kind == "gateway_usage") {
    GatewayUsage g;
    g.request = f.u64("request");
    auto status = f.i64("status");
    if (status < INT32_MIN || status > INT32_MAX) status = 0;
    g.status = static_cast<std::int32_t>(status);
    g.model = f.string("model");
    g.input_tokens = f.maybe_u64("input_tokens");
    g.output_tokens = f.maybe_u64("output_tokens");
    g.cache_read_tokens = f.maybe_u64("cache_read_tokens");
    g.cache_creation_tokens = f.maybe_u64("cache_creation_tokens");
    g.complete = f.boolean("complete");
    input = std::move(g);
  } else if (kind == "gateway_refused") {
    input = GatewayRefused{f.string("method"), f.string("path")};
  } else if (kind == "egress") {
    input = Egress{f.string("destination"), f.boolean("allowed"), f.string("why")};
  } else {
    return Result(boost::system::in_place_error, "unknown input kind \"" + std::string(kind) + "\"");
  }
  if (!f.error.empty()) return Result(boost::system::in_place_error, std::move(f.error));
  return input;
}

}  // namespace

std::string serialize(const Entry& entry) {
  json::object o;
  o["k"] = kKinds[entry.input.index()];
  o["now"] = to_ns(entry.now);
  std::visit([&o](const auto& input) { fill(o, input); }, entry.input);
  std::string line = json::serialize(o);
  line.push_back('\n');
  return line;
}

boost::system::result<Entry, std::string> parse(std::string_view line) {
  using Result = boost::system::result<Entry, std::string>;
  auto value = protocol::parse_json(line);
  if (!value || !value->is_object()) return Result(boost::system::in_place_error, "not a JSON object");
  Fields f{value->get_object(), {}};
  auto kind = f.string("k");
  std::int64_t now = f.i64("now");
  if (!f.error.empty()) return Result(boost::system::in_place_error, std::move(f.error));
  auto input = read_input(kind, f);
  if (!input) return Result(boost::system::in_place_error, input.error());
  return Entry{std::chrono::steady_clock::time_point(std::chrono::nanoseconds(now)), std::move(*input)};
}

}  // namespace journal

boost::system::result<InputJournal, std::string> InputJournal::create(const std::filesystem::path& path) {
  using Result = boost::system::result<InputJournal, std::string>;
  InputJournal j;
  j.fd_.reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0640));
  if (!j.fd_)
    return Result(boost::system::in_place_error, "cannot create " + path.string() + ": " + std::strerror(errno));
  ::fchmod(j.fd_.get(), 0640);  // whatever the umask
  std::string head = "{\"journal\":\"" + std::string(journal::kFormat) + "\"}\n";
  if (::write(j.fd_.get(), head.data(), head.size()) != static_cast<ssize_t>(head.size()))
    return Result(boost::system::in_place_error, "cannot write " + path.string() + ": " + std::strerror(errno));
  return j;
}

boost::system::result<InputJournal, std::string> InputJournal::open_append(const std::filesystem::path& path,
                                                                           std::uint64_t complete_bytes) {
  using Result = boost::system::result<InputJournal, std::string>;
  InputJournal j;
  j.fd_.reset(::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
  if (!j.fd_ || ::ftruncate(j.fd_.get(), static_cast<off_t>(complete_bytes)) != 0)
    return Result(boost::system::in_place_error, "cannot append to " + path.string() + ": " + std::strerror(errno));
  return j;
}

void InputJournal::append(const journal::Entry& entry) {
  if (failed_ || !fd_) return;
  if (!write_all(fd_.get(), journal::serialize(entry))) {
    failed_ = true;
    fd_.reset();
  }
}

boost::system::result<JournalRead, std::string> read_journal(const std::filesystem::path& path) {
  using Result = boost::system::result<JournalRead, std::string>;
  auto fail = [&](std::string why) { return Result(boost::system::in_place_error, path.string() + ": " + why); };
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail("cannot be read");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  JournalRead read;
  std::size_t at = 0;
  std::uint64_t number = 0;
  while (at < all.size()) {
    std::size_t nl = all.find('\n', at);
    if (nl == std::string::npos) {  // torn by a crash mid-write: never handed in
      read.torn_tail = true;
      break;
    }
    std::string_view line(all.data() + at, nl - at);
    at = nl + 1;
    read.complete_bytes = at;
    if (++number == 1) {
      auto head = protocol::parse_json(line);
      const json::value* format = head && head->is_object() ? head->get_object().if_contains("journal") : nullptr;
      if (!format || !format->is_string() || format->get_string() != journal::kFormat)
        return fail("line 1 does not name " + std::string(journal::kFormat));
      continue;
    }
    auto entry = journal::parse(line);
    if (!entry) return fail("line " + std::to_string(number) + ": " + entry.error());
    read.entries.push_back(std::move(*entry));
  }
  if (number == 0) return fail("is empty");
  return read;
}

}  // namespace mh::daemon
