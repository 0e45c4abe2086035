// The daemon <-> supervisor wire and the supervisor's spec: every message round-trips; malformed
// and oversized lines are refused by name; unknown keys and unknown kinds are ignored (the
// versioning rule); the version negotiation of both sides.
#include "daemon/supervisor/supervisor_protocol.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>

#include "daemon/supervisor/supervisor_spec.hpp"

namespace mh::supervisor {
namespace {

// Serializes `message` to one line, parses it back with `parse` and serializes that again: the
// same line both times. `unread` stands in for a message that did not parse.
template <class Message, class Parse>
Message round_trip(const Message& message, Parse parse, Message unread) {
  std::string line = serialize(message);
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line: " << line;
  line.pop_back();
  auto parsed = parse(line);
  EXPECT_TRUE(parsed) << (parsed ? "" : parsed.error());
  EXPECT_TRUE(parsed && *parsed) << line;
  if (!parsed || !*parsed) return unread;
  EXPECT_EQ(serialize(**parsed), line + "\n");
  return **parsed;
}

ToSupervisor to_round_trip(const ToSupervisor& message) {
  return round_trip(
      message, [](std::string_view line) { return parse_to_supervisor(line); }, ToSupervisor{CloseStdin{}});
}

FromSupervisor from_round_trip(const FromSupervisor& message) {
  return round_trip(
      message, [](std::string_view line) { return parse_from_supervisor(line); }, FromSupervisor{ErrEnd{}});
}

TEST(SupervisorProtocol, EveryDaemonMessageRoundTrips) {
  EXPECT_EQ(std::get<Attach>(to_round_trip(Attach{3})).protocol, 3u);
  EXPECT_EQ(std::get<In>(to_round_trip(In{"{\"type\":\"user\",\"text\":\"a\\nb \\u00e9\"}"})).line,
            "{\"type\":\"user\",\"text\":\"a\\nb \\u00e9\"}");
  EXPECT_TRUE(std::holds_alternative<CloseStdin>(to_round_trip(CloseStdin{})));
  auto reply = std::get<HookReply>(to_round_trip(HookReply{42, "{\"decision\":\"deny\"}"}));
  EXPECT_EQ(reply.connection, 42u);
  EXPECT_EQ(reply.line, "{\"decision\":\"deny\"}");
  EXPECT_TRUE(std::holds_alternative<Release>(to_round_trip(Release{})));
  EXPECT_EQ(std::get<Respawn>(to_round_trip(Respawn{{"--resume", "s 1", ""}})).extra_args,
            (std::vector<std::string>{"--resume", "s 1", ""}));
  EXPECT_TRUE(std::get<Respawn>(to_round_trip(Respawn{})).extra_args.empty());
  EXPECT_EQ(serialize(ToSupervisor(In{"x"})), "{\"t\":\"in\",\"line\":\"x\"}\n");
}

TEST(SupervisorProtocol, EverySupervisorMessageRoundTrips) {
  Hello hello;
  hello.protocol = 1;
  hello.version = "0.1.0";
  hello.supervisor_pid = 100;
  hello.vendor_pid = 101;
  hello.stdout_bytes = 5000000000ull;
  hello.stdout_ended = true;
  hello.stderr_ended = false;
  hello.stdin_bytes = 12;
  hello.stdin_closed = true;
  hello.exited = protocol::ProcessTermination{protocol::ProcessKind::signaled, 0, 9};
  hello.hooks_open = {Hook{3, "{\"a\":1}"}, Hook{5, "{}"}};
  hello.hooks_gone = {1, 4};
  hello.ungoverned_ms = 1234;
  auto back = std::get<Hello>(from_round_trip(hello));
  EXPECT_EQ(back.ungoverned_ms, 1234u) << "how long no daemon was attached (issue 24's RUN_ADOPTED)";
  EXPECT_EQ(back.supervisor_pid, 100);
  EXPECT_EQ(back.vendor_pid, 101);
  EXPECT_EQ(back.stdout_bytes, 5000000000ull);
  EXPECT_TRUE(back.stdout_ended);
  EXPECT_FALSE(back.stderr_ended);
  EXPECT_EQ(back.stdin_bytes, 12u);
  ASSERT_TRUE(back.exited);
  EXPECT_EQ(back.exited->kind, protocol::ProcessKind::signaled);
  EXPECT_EQ(back.exited->signal, 9);
  ASSERT_EQ(back.hooks_open.size(), 2u);
  EXPECT_EQ(back.hooks_open[1].connection, 5u);
  EXPECT_EQ(back.hooks_gone, (std::vector<std::uint64_t>{1, 4}));
  EXPECT_FALSE(back.can_respawn) << "absent: an older supervisor, which the daemon does not ask to respawn";
  hello.can_respawn = true;
  EXPECT_TRUE(std::get<Hello>(from_round_trip(hello)).can_respawn);

  // A failed spawn: null is unknown, never 0.
  Hello failed;
  failed.version = "dev";
  failed.supervisor_pid = 7;
  failed.spawn_error = "missing binary: /nope";
  std::string line = serialize(FromSupervisor(failed));
  EXPECT_NE(line.find("\"vendor_pid\":null"), std::string::npos) << line;
  EXPECT_NE(line.find("\"exited\":null"), std::string::npos) << line;
  auto failed_back = std::get<Hello>(from_round_trip(failed));
  EXPECT_FALSE(failed_back.vendor_pid);
  EXPECT_FALSE(failed_back.exited);
  EXPECT_EQ(failed_back.spawn_error, "missing binary: /nope");
  EXPECT_FALSE(failed_back.ungoverned_ms) << "an older supervisor's hello says nothing of it";

  EXPECT_EQ(std::get<Out>(from_round_trip(Out{77})).bytes, 77u);
  EXPECT_EQ(std::get<OutEnd>(from_round_trip(OutEnd{78})).bytes, 78u);
  EXPECT_TRUE(std::holds_alternative<ErrEnd>(from_round_trip(ErrEnd{})));
  auto exited = std::get<Exited>(from_round_trip(Exited{{protocol::ProcessKind::exited, 3, 0}}));
  EXPECT_EQ(exited.termination.kind, protocol::ProcessKind::exited);
  EXPECT_EQ(exited.termination.code, 3);
  auto hook = std::get<Hook>(from_round_trip(Hook{9, "{\"tool\":\"Bash\"}"}));
  EXPECT_EQ(hook.connection, 9u);
  EXPECT_EQ(hook.line, "{\"tool\":\"Bash\"}");
  EXPECT_EQ(std::get<HookGone>(from_round_trip(HookGone{9})).connection, 9u);
  EXPECT_EQ(std::get<Refused>(from_round_trip(Refused{"attach first"})).why, "attach first");
  EXPECT_EQ(std::get<Respawned>(from_round_trip(Respawned{202, std::nullopt})).vendor_pid, 202);
  auto not_spawned = std::get<Respawned>(from_round_trip(Respawned{std::nullopt, "the vendor is still running"}));
  EXPECT_FALSE(not_spawned.vendor_pid);
  EXPECT_EQ(not_spawned.spawn_error, "the vendor is still running");
  EXPECT_EQ(serialize(FromSupervisor(Exited{{protocol::ProcessKind::signaled, 0, 15}})),
            "{\"t\":\"exited\",\"termination\":{\"kind\":\"signaled\",\"signal\":15}}\n");
}

// A gateway's usage carries why no answer came (an upstream it could not reach); an answered
// request's carries none.
TEST(SupervisorProtocol, AGatewayUsageCarriesWhyNoAnswerCame) {
  GatewayUsage usage;
  usage.request = 3;
  usage.model = "claude-test";
  usage.failure = "TLS handshake with api.example failed: certificate verify failed";
  auto back = std::get<GatewayUsage>(from_round_trip(usage));
  EXPECT_EQ(back.request, 3u);
  EXPECT_EQ(back.status, 0);
  EXPECT_EQ(back.failure, usage.failure);
  GatewayUsage answered;
  answered.request = 4;
  answered.status = 200;
  answered.complete = true;
  EXPECT_TRUE(std::get<GatewayUsage>(from_round_trip(answered)).failure.empty());
}

TEST(SupervisorProtocol, MalformedLinesAreRefusedByName) {
  auto refusal = [](std::string_view line) {
    auto parsed = parse_to_supervisor(line);
    EXPECT_FALSE(parsed) << line;
    return parsed ? std::string() : parsed.error();
  };
  EXPECT_NE(refusal("not json").find("not JSON"), std::string::npos);
  EXPECT_NE(refusal("[1,2]").find("expected an object"), std::string::npos);
  EXPECT_NE(refusal("{\"line\":\"x\"}").find("no \"t\""), std::string::npos);
  EXPECT_NE(refusal("{\"t\":5}").find("field \"t\""), std::string::npos);
  EXPECT_NE(refusal("{\"t\":\"in\"}").find("missing required field \"line\""), std::string::npos);
  EXPECT_NE(refusal("{\"t\":\"in\",\"line\":7}").find("field \"line\" is the number 7"), std::string::npos);
  EXPECT_NE(refusal("{\"t\":\"hook_reply\",\"connection\":-1,\"line\":\"{}\"}").find("\"connection\""),
            std::string::npos);
  EXPECT_NE(refusal("{\"t\":\"attach\",\"protocol\":\"1\"}").find("\"protocol\""), std::string::npos);

  auto from = parse_from_supervisor("{\"t\":\"exited\",\"termination\":{\"kind\":\"vanished\"}}");
  ASSERT_FALSE(from);
  EXPECT_NE(from.error().find("vanished"), std::string::npos) << from.error();
  from = parse_from_supervisor("{\"t\":\"exited\",\"termination\":{\"kind\":\"exited\"}}");
  ASSERT_FALSE(from);
  EXPECT_NE(from.error().find("\"code\""), std::string::npos) << from.error();
  from = parse_from_supervisor("{\"t\":\"hello\",\"protocol\":1}");
  ASSERT_FALSE(from);
  EXPECT_NE(from.error().find("missing required field"), std::string::npos) << from.error();
  // A respawn's answer says one of the two; its arguments are strings.
  from = parse_from_supervisor("{\"t\":\"respawned\"}");
  ASSERT_FALSE(from);
  EXPECT_NE(from.error().find("neither"), std::string::npos) << from.error();
  EXPECT_NE(refusal("{\"t\":\"respawn\",\"extra_args\":[\"--resume\",7]}").find("\"extra_args\""), std::string::npos);
  EXPECT_NE(refusal("{\"t\":\"respawn\"}").find("missing required field \"extra_args\""), std::string::npos);
}

TEST(SupervisorProtocol, OversizedLinesAreRefusedByName) {
  std::string line = "{\"t\":\"in\",\"line\":\"" + std::string(kMaxToSupervisorLineBytes, 'a') + "\"}";
  auto parsed = parse_to_supervisor(line);
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().find("over the 8 MiB bound"), std::string::npos) << parsed.error();
  // Just under the bound is a message.
  std::string fits = "{\"t\":\"in\",\"line\":\"" + std::string(kMaxToSupervisorLineBytes - 20, 'a') + "\"}";
  ASSERT_LE(fits.size(), kMaxToSupervisorLineBytes);
  auto ok = parse_to_supervisor(fits);
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ(std::get<In>(**ok).line.size(), kMaxToSupervisorLineBytes - 20);
  EXPECT_EQ(refuse_oversized(9000000, kMaxToSupervisorLineBytes),
            "a line of at least 9000000 bytes, over the 8 MiB bound");
}

TEST(SupervisorProtocol, UnknownKindsAndKeysAreIgnored) {
  auto unknown = parse_to_supervisor("{\"t\":\"resize\",\"rows\":40}");
  ASSERT_TRUE(unknown) << unknown.error();
  EXPECT_FALSE(*unknown) << "a later daemon's message is ignored";
  auto later = parse_from_supervisor("{\"t\":\"cpu\",\"usec\":5}");
  ASSERT_TRUE(later) << later.error();
  EXPECT_FALSE(*later);

  auto extra = parse_to_supervisor("{\"t\":\"in\",\"line\":\"x\",\"priority\":\"high\"}");
  ASSERT_TRUE(extra && *extra);
  EXPECT_EQ(std::get<In>(**extra).line, "x");
  auto out = parse_from_supervisor("{\"bytes\":5,\"t\":\"out\",\"mtime\":1}");
  ASSERT_TRUE(out && *out);
  EXPECT_EQ(std::get<Out>(**out).bytes, 5u);
}

// What a FromSupervisorReader handed on, fed `stream` in pieces of `piece` bytes.
struct Read {
  std::vector<FromSupervisor> messages;
  std::vector<std::string> warnings;
  std::optional<std::string> lost;
  // What the reader hands on goes here.
  auto sink() {
    return [this](ParsedFromSupervisor parsed) {
      if (!parsed)
        warnings.push_back(parsed.error());
      else if (*parsed)
        messages.push_back(std::move(**parsed));
    };
  }
};
Read read_stream(std::string_view stream, std::size_t piece, std::size_t max_carried = kMaxCarriedOutBytes) {
  FromSupervisorReader reader(max_carried);
  Read read;
  auto sink = read.sink();
  for (std::size_t at = 0; at < stream.size(); at += piece)
    reader.feed(stream.substr(at, piece), sink);
  reader.finish(sink);
  read.lost = reader.lost();
  return read;
}

Hello carrying_hello(std::uint64_t carry) {
  Hello hello;
  hello.version = "dev";
  hello.supervisor_pid = 7;
  hello.carry_out_bytes = carry;
  return hello;
}

Out carrying(std::uint64_t bytes, std::string data) {
  Out out;
  out.bytes = bytes;
  out.data = std::move(data);
  return out;
}

// The attach asks for carried bytes, the hello agrees; an `out` that carries them is its line,
// then the bytes raw (here a vendor line that looks like a message, and one without its '\n'),
// read back whole however the stream is cut.
TEST(SupervisorProtocol, AnOutCarriesTheVendorsBytesAfterItsLine) {
  EXPECT_EQ(std::get<Attach>(to_round_trip(Attach{1, kMaxCarriedOutBytes})).carry_out_bytes, kMaxCarriedOutBytes);
  EXPECT_EQ(std::get<Hello>(from_round_trip(carrying_hello(4096))).carry_out_bytes, 4096u);
  // An older side's attach and hello say nothing: nothing is carried.
  auto old_attach = parse_to_supervisor("{\"t\":\"attach\",\"protocol\":1}");
  ASSERT_TRUE(old_attach && *old_attach);
  EXPECT_EQ(std::get<Attach>(**old_attach).carry_out_bytes, 0u);

  const std::string vendor = "{\"t\":\"exited\",\"termination\":{\"kind\":\"unknown\"}}\n{\"type\":\"assistant\"";
  const std::string out_line = serialize(FromSupervisor(carrying(1000 + vendor.size(), vendor)));
  EXPECT_EQ(out_line, "{\"t\":\"out\",\"bytes\":" + std::to_string(1000 + vendor.size()) +
                          ",\"carried\":" + std::to_string(vendor.size()) + "}\n" + vendor);
  const std::string stream =
      serialize(FromSupervisor(carrying_hello(kMaxCarriedOutBytes))) + out_line + serialize(FromSupervisor(ErrEnd{}));
  for (std::size_t piece : {std::size_t{1}, std::size_t{7}, stream.size()}) {
    Read read = read_stream(stream, piece);
    ASSERT_EQ(read.messages.size(), 3u) << "in pieces of " << piece;
    EXPECT_TRUE(read.warnings.empty());
    EXPECT_FALSE(read.lost);
    const Out& out = std::get<Out>(read.messages[1]);
    EXPECT_EQ(out.bytes, 1000 + vendor.size());
    EXPECT_EQ(out.data, vendor);
    EXPECT_TRUE(std::holds_alternative<ErrEnd>(read.messages[2]));
  }
  // A payload cut short by the end of the stream is not handed on.
  Read cut = read_stream(stream.substr(0, stream.size() - serialize(FromSupervisor(ErrEnd{})).size() - 3), 64);
  EXPECT_EQ(cut.messages.size(), 1u);
}

// Bytes the daemon did not agree to take (a hello that agreed to none, or more than its bound) are
// passed over as they arrive: the `out` comes without data, with a warning, and the stream goes on.
TEST(SupervisorProtocol, CarriedBytesNotAgreedToArePassedOver) {
  const std::string bytes(100, 'x');
  const std::string after = serialize(FromSupervisor(carrying(200, bytes))) + serialize(FromSupervisor(ErrEnd{}));
  for (auto [hello_carry, daemon_bound] : {std::pair<std::uint64_t, std::size_t>{0, kMaxCarriedOutBytes},
                                           std::pair<std::uint64_t, std::size_t>{kMaxCarriedOutBytes, 99}}) {
    Read read = read_stream(serialize(FromSupervisor(carrying_hello(hello_carry))) + after, 5, daemon_bound);
    ASSERT_EQ(read.messages.size(), 3u);
    const Out& out = std::get<Out>(read.messages[1]);
    EXPECT_EQ(out.bytes, 200u);
    EXPECT_TRUE(out.data.empty());
    EXPECT_EQ(out.carried, 0u);
    ASSERT_EQ(read.warnings.size(), 1u);
    EXPECT_NE(read.warnings[0].find("an out carried 100 bytes"), std::string::npos) << read.warnings[0];
    EXPECT_TRUE(std::holds_alternative<ErrEnd>(read.messages[2]));
    EXPECT_FALSE(read.lost);
  }
}

// A line that cannot be read is skipped while nothing is carried; once bytes are carried it loses
// the framing (what follows could be a payload taken for messages): nothing more is read.
TEST(SupervisorProtocol, AnUnreadableLineWhileCarryingLosesTheFraming) {
  const std::string rest = "{\"t\":\"out\",\"bytes\":5\n" + serialize(FromSupervisor(ErrEnd{}));
  Read skipping = read_stream(serialize(FromSupervisor(carrying_hello(0))) + rest, 3);
  EXPECT_FALSE(skipping.lost);
  ASSERT_EQ(skipping.messages.size(), 2u);
  EXPECT_TRUE(std::holds_alternative<ErrEnd>(skipping.messages[1]));
  EXPECT_EQ(skipping.warnings.size(), 1u);

  Read lost = read_stream(serialize(FromSupervisor(carrying_hello(kMaxCarriedOutBytes))) + rest, 3);
  ASSERT_TRUE(lost.lost);
  EXPECT_NE(lost.lost->find("framing is lost"), std::string::npos) << *lost.lost;
  EXPECT_EQ(lost.messages.size(), 1u) << "nothing after the unreadable line";
}

// A run's stream as a supervisor writes it (the hello, a first `out` carrying the vendor's init
// line and half of the next, an `out` whose bytes were not carried, one carrying the rest, the
// ends), cut once and twice at every place: each cut (inside a line, at its '\n', inside a
// payload, at a payload's last byte) hands on the same messages with the same bytes.
TEST(SupervisorProtocol, AStreamCutAnywhereReadsTheSameMessages) {
  const std::string first = "{\"type\":\"system\",\"subtype\":\"init\"}\n{\"type\":\"assi";
  const std::string rest = "stant\"}\n" + std::string(3000, 'z') + "\n";
  Out not_carried;
  not_carried.bytes = first.size();
  const std::vector<FromSupervisor> sent{
      carrying_hello(kMaxCarriedOutBytes),        carrying(first.size(), first),      not_carried,
      carrying(first.size() + rest.size(), rest), OutEnd{first.size() + rest.size()}, ErrEnd{}};
  std::string stream;
  for (const auto& message : sent)
    stream += serialize(message);
  const std::uint64_t total = first.size() + rest.size();
  auto same = [&sent, total](const Read& read, std::size_t a, std::size_t b) {
    ASSERT_EQ(read.messages.size(), sent.size()) << "cut at " << a << " and " << b;
    EXPECT_TRUE(read.warnings.empty()) << "cut at " << a << " and " << b;
    EXPECT_FALSE(read.lost);
    for (std::size_t i = 1; i <= 3; ++i) {
      const Out& got = std::get<Out>(read.messages[i]);
      EXPECT_EQ(got.bytes, std::get<Out>(sent[i]).bytes) << "cut at " << a << " and " << b;
      EXPECT_EQ(got.data, std::get<Out>(sent[i]).data) << "cut at " << a << " and " << b;
    }
    EXPECT_EQ(std::get<OutEnd>(read.messages[4]).bytes, total);
  };
  const std::string_view whole(stream);
  auto read_cut = [&whole](std::size_t a, std::size_t b) {
    FromSupervisorReader reader(kMaxCarriedOutBytes);
    Read read;
    auto sink = read.sink();
    reader.feed(whole.substr(0, a), sink);
    reader.feed(whole.substr(a, b - a), sink);
    reader.feed(whole.substr(b), sink);
    reader.finish(sink);
    read.lost = reader.lost();
    return read;
  };
  for (std::size_t a = 0; a <= whole.size(); ++a) {
    same(read_cut(a, a), a, a);
    if (::testing::Test::HasFailure()) return;
  }
  // Twice: every first cut, the second every 97 bytes after it (a payload's start and end among them).
  for (std::size_t a = 0; a <= whole.size(); a += 13)
    for (std::size_t b = a; b <= whole.size(); b += 97) {
      same(read_cut(a, b), a, b);
      if (::testing::Test::HasFailure()) return;
    }
}

// The daemon uses carried bytes only where they continue what it has read: [bytes - size, bytes)
// must reach back to `fed`; bytes it has already are cut off, a gap or an impossible offset means
// the transcript is read instead.
TEST(SupervisorProtocol, CarriedBytesAreUsedOnlyWhereTheyContinueWhatWasRead) {
  const Out out = carrying(110, "0123456789");  // the transcript's bytes [100, 110)
  EXPECT_EQ(carried_from(out, 100), "0123456789");
  EXPECT_EQ(carried_from(out, 104), "456789") << "an overlap: the part not read yet";
  EXPECT_EQ(carried_from(out, 110), "") << "nothing new";
  EXPECT_FALSE(carried_from(out, 99)) << "a gap before the carried bytes";
  EXPECT_FALSE(carried_from(out, 111)) << "past the size the out reports";
  EXPECT_FALSE(carried_from(carrying(110, ""), 110)) << "nothing carried";
  EXPECT_FALSE(carried_from(carrying(5, "0123456789"), 0)) << "more bytes than the transcript holds";
}

TEST(SupervisorProtocol, VersionNegotiation) {
  // The supervisor speaks min(the daemon's highest, its own), never below its oldest.
  EXPECT_EQ(*supervisor_speaks(1), 1u);
  EXPECT_EQ(*supervisor_speaks(9), kProtocol) << "a newer daemon is answered in this supervisor's version";
  auto old = supervisor_speaks(0);
  ASSERT_FALSE(old);
  EXPECT_EQ(old.error(), "this supervisor speaks protocol 1..1, the daemon at most 0");
  // The daemon speaks what the hello says, within the versions it ever shipped.
  EXPECT_EQ(*daemon_accepts(1), 1u);
  auto newer = daemon_accepts(7);
  ASSERT_FALSE(newer);
  EXPECT_EQ(newer.error(), "supervisor speaks protocol 7, this daemon 1..1");
  EXPECT_FALSE(daemon_accepts(0));
}

SupervisorSpec sample_spec() {
  SupervisorSpec spec;
  spec.run_id = "20261129T184844Z-3fa9c1d27b04";
  spec.socket = "/state/runs/r/supervisor.sock";
  spec.program = "/usr/bin/claude";
  spec.args = {"-p", "--output-format", "stream-json"};
  spec.env = {{"HOME", "/state/runs/r/scratch"}, {"METAHARNESS_RUN", "r"}};
  spec.cwd = "/state/runs/r/scratch";
  spec.transcript = "/state/runs/r/vendor-stdout.jsonl";
  spec.stderr_log = "/state/runs/r/vendor-stderr.log";
  spec.stdin_log = "/state/runs/r/vendor-stdin.jsonl";
  spec.cgroup = "/sys/fs/cgroup/mh-abc/r";
  spec.identity = SpecIdentity{999, 998};
  spec.hook_channel = SpecHookChannel{"@mh-hook-r", 999, "METAHARNESS_RUN=r"};
  spec.adopt_within_ms = 30000;
  return spec;
}

TEST(SupervisorSpec, RoundTripsAndNamesTheRunDirectoryFiles) {
  SupervisorSpec spec = sample_spec();
  spec.secret_env = {"GITHUB_TOKEN", "MH_SECRET"};
  auto back = parse_spec(boost::json::serialize(spec_to_json(spec)));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->run_id, spec.run_id);
  EXPECT_EQ(back->secret_env, spec.secret_env);
  EXPECT_EQ(back->args, spec.args);
  EXPECT_EQ(back->env, spec.env);
  EXPECT_EQ(back->stderr_log, spec.stderr_log);
  EXPECT_EQ(back->cgroup, spec.cgroup);
  ASSERT_TRUE(back->identity);
  EXPECT_EQ(back->identity->gid, 998u);
  ASSERT_TRUE(back->hook_channel);
  EXPECT_EQ(back->hook_channel->marker, "METAHARNESS_RUN=r");
  EXPECT_EQ(back->adopt_within_ms, 30000u);
  EXPECT_FALSE(back->ungoverned_halt_after_ms) << "unset: the run goes on to the adopt bound";
  SupervisorSpec halting = sample_spec();
  halting.ungoverned_halt_after_ms = 5000;
  auto halting_back = parse_spec(boost::json::serialize(spec_to_json(halting)));
  ASSERT_TRUE(halting_back) << halting_back.error();
  EXPECT_EQ(halting_back->ungoverned_halt_after_ms, std::optional<std::uint64_t>(5000));
  EXPECT_EQ(back->state_file(), "/state/runs/r/supervisor.json");
  EXPECT_EQ(back->log_file(), "/state/runs/r/supervisor.log");

  SupervisorSpec bare = sample_spec();
  bare.cgroup.reset();
  bare.identity.reset();
  bare.hook_channel.reset();
  auto bare_back = parse_spec(boost::json::serialize(spec_to_json(bare)));
  ASSERT_TRUE(bare_back) << bare_back.error();
  EXPECT_FALSE(bare_back->cgroup);
  EXPECT_FALSE(bare_back->identity);
  EXPECT_FALSE(bare_back->hook_channel);

  // An older daemon's spec has no secret_env: nothing of the environment is marked secret.
  auto older = spec_to_json(spec);
  older.as_object().erase("secret_env");
  auto older_back = spec_from_json(older);
  ASSERT_TRUE(older_back) << older_back.error();
  EXPECT_TRUE(older_back->secret_env.empty());
}

TEST(SupervisorSpec, RefusesByName) {
  auto refusal = [](const std::function<void(boost::json::object&)>& edit) {
    auto value = spec_to_json(sample_spec());
    edit(value.as_object());
    auto parsed = spec_from_json(value);
    EXPECT_FALSE(parsed);
    return parsed ? std::string() : parsed.error();
  };
  EXPECT_NE(refusal([](auto& o) { o.erase("program"); }).find("missing required field \"program\""), std::string::npos);
  EXPECT_NE(refusal([](auto& o) { o["cwd"] = "relative/dir"; }).find("expected an absolute path"), std::string::npos);
  EXPECT_NE(refusal([](auto& o) { o["env"] = boost::json::array{boost::json::array{"ONLY"}}; }).find("\"env\""),
            std::string::npos);
  EXPECT_NE(refusal([](auto& o) { o["protocol"] = 2; }).find("reads spec 1"), std::string::npos);
  EXPECT_NE(refusal([](auto& o) { o["hook_channel"].as_object()["address"] = "no-at"; }).find("@<abstract name>"),
            std::string::npos);
  EXPECT_NE(refusal([](auto& o) {
              o["hook_channel"].as_object()["address"] = "relative/hook.sock";
            }).find("or an absolute path"),
            std::string::npos);
  EXPECT_NE(refusal([](auto& o) { o.erase("adopt_within_ms"); }).find("adopt_within_ms"), std::string::npos);
  EXPECT_NE(refusal([](auto& o) { o["secret_env"] = "MH_SECRET"; }).find("\"secret_env\""), std::string::npos);
  for (boost::json::value bad : {boost::json::value(0), boost::json::value(-5), boost::json::value("60")})
    EXPECT_NE(refusal([&](auto& o) { o["ungoverned_halt_after_ms"] = bad; }).find("\"ungoverned_halt_after_ms\""),
              std::string::npos)
        << bad;
  EXPECT_NE(refusal([](auto& o) { o["secret_env"] = boost::json::array{7}; }).find("\"secret_env\""),
            std::string::npos);
  EXPECT_NE(parse_spec("{").error().find("not JSON"), std::string::npos);
  EXPECT_NE(refusal([](auto& o) { o["vendor_env"] = "LD_PRELOAD=x"; }).find("\"vendor_env\""), std::string::npos);
  EXPECT_NE(refusal([](auto& o) {
              o["vendor_env"] = boost::json::array{boost::json::array{1, 2}};
            }).find("\"vendor_env\""),
            std::string::npos);
  // The vendor's arguments: present, an array, strings only.
  EXPECT_NE(refusal([](auto& o) { o.erase("args"); }).find("\"args\""), std::string::npos);
  EXPECT_NE(refusal([](auto& o) { o["args"] = "-p go"; }).find("\"args\""), std::string::npos);
  EXPECT_NE(refusal([](auto& o) { o["args"] = boost::json::array{"-p", 7}; }).find("\"args\""), std::string::npos);
}

// A sandboxed plan's spec carries the vendor's environment apart from the privileged hops' fixed
// one, so the supervisor hands it over after the drop (issue 24, item 1); a plan that is not
// sandboxed carries none (null, or no key from an older daemon).
TEST(SupervisorSpec, TheVendorsEnvironmentTravelsApartFromTheHopsFixedOne) {
  SupervisorSpec spec = sample_spec();
  spec.env = {{"METAHARNESS_RUN", "r"}};
  spec.vendor_env = std::vector<std::pair<std::string, std::string>>{{"HOME", "/h"}, {"MH_DECLARED", "v"}};
  auto json = spec_to_json(spec);
  auto back = spec_from_json(json);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->env, spec.env);
  ASSERT_TRUE(back->vendor_env);
  EXPECT_EQ(*back->vendor_env, *spec.vendor_env);
  spec.vendor_env.reset();
  auto none = spec_from_json(spec_to_json(spec));
  ASSERT_TRUE(none) << none.error();
  EXPECT_FALSE(none->vendor_env);
  json.as_object().erase("vendor_env");
  auto older = spec_from_json(json);
  ASSERT_TRUE(older) << older.error();
  EXPECT_FALSE(older->vendor_env);
}

// The run's gateway and egress proxy (issue 25): both shapes of upstream (a URL with its key's file,
// or the supervisor's own scripted endpoint), both shapes of listener, and a hook channel on a
// path (a run with a network of its own).
SupervisorSpec gateway_spec() {
  SupervisorSpec spec = sample_spec();
  spec.hook_channel->address = "/state/runs/r/gate/hook.sock";
  spec.identity.reset();  // sandboxed: bwrap starts as root, the run's user is the one it drops to
  spec.run_user = SpecIdentity{61184, 61184};
  SpecGateway g;
  g.upstream_name = "main";
  g.wire = "anthropic";
  g.url = "https://api.example.com";
  g.credential = "/etc/metaharness/anthropic.key";
  g.ca_file = "/etc/ssl/test-ca.pem";
  g.header = "x-api-key";
  g.token = "mh-run-r-0123456789abcdef0123456789abcdef";
  g.reserve = true;
  g.listen.path = "/state/runs/r/gate/model.sock";
  spec.gateway = g;
  spec.egress = SpecEgress{{"github.com:443", "[2001:db8::1]:8443"}, SpecListen{"/state/runs/r/gate/egress.sock", {}}};
  return spec;
}

TEST(SupervisorSpec, TheGatewayAndTheEgressProxyRoundTrip) {
  SupervisorSpec spec = gateway_spec();
  auto back = parse_spec(boost::json::serialize(spec_to_json(spec)));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->hook_channel->address, "/state/runs/r/gate/hook.sock");
  EXPECT_FALSE(back->identity);
  ASSERT_TRUE(back->run_user);
  EXPECT_EQ(back->run_user->uid, 61184u);
  EXPECT_EQ(back->run_owner()->gid, 61184u);
  ASSERT_TRUE(back->gateway);
  const SpecGateway& g = *back->gateway;
  EXPECT_EQ(g.upstream_name, "main");
  EXPECT_EQ(g.wire, "anthropic");
  EXPECT_EQ(g.url, "https://api.example.com");
  EXPECT_EQ(g.credential, spec.gateway->credential);
  EXPECT_EQ(g.ca_file, spec.gateway->ca_file);
  EXPECT_EQ(g.header, "x-api-key");
  EXPECT_FALSE(g.scenario);
  EXPECT_FALSE(g.scenario_log);
  EXPECT_EQ(g.token, spec.gateway->token);
  EXPECT_TRUE(g.reserve);
  EXPECT_EQ(g.listen.path, spec.gateway->listen.path);
  EXPECT_FALSE(g.listen.tcp_port);
  ASSERT_TRUE(back->egress);
  EXPECT_EQ(back->egress->allowed, spec.egress->allowed);
  EXPECT_EQ(back->egress->listen.path, spec.egress->listen.path);

  // A model_scenario behind the gateway, on a port of the host's loopback (network = "host").
  spec.gateway->url.clear();
  spec.gateway->credential.reset();
  spec.gateway->ca_file.reset();
  spec.gateway->header.clear();
  spec.gateway->wire = "openai-responses";
  spec.gateway->scenario = "/state/runs/r/scenario.json";
  spec.gateway->scenario_log = "/state/runs/r/model-requests.jsonl";
  spec.gateway->reserve = false;
  spec.gateway->listen = SpecListen{{}, 41234};
  spec.egress.reset();
  auto scripted = parse_spec(boost::json::serialize(spec_to_json(spec)));
  ASSERT_TRUE(scripted) << scripted.error();
  ASSERT_TRUE(scripted->gateway);
  EXPECT_EQ(scripted->gateway->scenario, spec.gateway->scenario);
  EXPECT_EQ(scripted->gateway->scenario_log, spec.gateway->scenario_log);
  EXPECT_EQ(scripted->gateway->wire, "openai-responses");
  EXPECT_EQ(scripted->gateway->listen.tcp_port, 41234);
  spec.gateway->wire = "gemini";
  auto gemini = parse_spec(boost::json::serialize(spec_to_json(spec)));
  ASSERT_TRUE(gemini) << gemini.error();
  EXPECT_EQ(gemini->gateway->wire, "gemini");
  EXPECT_FALSE(scripted->gateway->listen.path);
  EXPECT_FALSE(scripted->egress);

  // Absent (an older daemon) reads as none.
  auto json = spec_to_json(sample_spec());
  json.as_object().erase("gateway");
  json.as_object().erase("egress");
  json.as_object().erase("run_user");
  auto older = spec_from_json(json);
  ASSERT_TRUE(older) << older.error();
  EXPECT_FALSE(older->gateway);
  EXPECT_FALSE(older->egress);
  EXPECT_FALSE(older->run_user);
  EXPECT_EQ(older->run_owner()->uid, 999u) << "the identity, without a run_user";
}

TEST(SupervisorSpec, AGatewayOrEgressBlockIsRefusedByName) {
  auto refusal = [](const std::function<void(boost::json::object&)>& edit) {
    auto value = spec_to_json(gateway_spec());
    edit(value.as_object());
    auto parsed = spec_from_json(value);
    EXPECT_FALSE(parsed);
    return parsed ? std::string() : parsed.error();
  };
  auto gw = [](boost::json::object& o) -> boost::json::object& { return o["gateway"].as_object(); };
  auto eg = [](boost::json::object& o) -> boost::json::object& { return o["egress"].as_object(); };
  auto named = [](const std::string& error, const std::string& what) {
    return error.find(what) != std::string::npos ? ::testing::AssertionSuccess()
                                                 : ::testing::AssertionFailure() << error << " does not name " << what;
  };
  EXPECT_TRUE(named(refusal([&](auto& o) { o["gateway"] = "yes"; }), "\"gateway\""));
  EXPECT_TRUE(
      named(refusal([&](auto& o) { gw(o)["wire"] = "smtp"; }), "expected anthropic, openai-responses or gemini"));
  EXPECT_TRUE(named(refusal([&](auto& o) { gw(o).erase("token"); }), "missing required field \"token\""));
  EXPECT_TRUE(named(refusal([&](auto& o) { gw(o)["token"] = ""; }), "field \"token\" is empty"));
  EXPECT_TRUE(named(refusal([&](auto& o) { gw(o)["reserve"] = "no"; }), "\"reserve\""));
  EXPECT_TRUE(named(refusal([&](auto& o) { gw(o)["credential"] = "key.txt"; }), "expected an absolute path"));
  EXPECT_TRUE(named(refusal([&](auto& o) { gw(o)["url"] = ""; }), "neither \"url\" nor \"scenario\""));
  EXPECT_TRUE(named(refusal([&](auto& o) { gw(o)["scenario"] = "/s.json"; }), "are both set"));
  EXPECT_TRUE(named(refusal([&](auto& o) {
                      gw(o)["url"] = "";
                      gw(o)["scenario"] = "/s.json";
                    }),
                    "without \"scenario_log\""));
  EXPECT_TRUE(named(refusal([&](auto& o) { gw(o).erase("listen"); }), "\"listen\""));
  EXPECT_TRUE(named(refusal([&](auto& o) { gw(o)["listen"].as_object()["tcp_port"] = 8080; }),
                    "exactly one of \"path\" and \"tcp_port\""));
  EXPECT_TRUE(named(refusal([&](auto& o) {
                      gw(o)["listen"] = boost::json::object{{"path", nullptr}, {"tcp_port", nullptr}};
                    }),
                    "exactly one of"));
  EXPECT_TRUE(named(refusal([&](auto& o) {
                      gw(o)["listen"] = boost::json::object{{"path", nullptr}, {"tcp_port", 70000}};
                    }),
                    "expected a port"));
  EXPECT_TRUE(named(refusal([&](auto& o) { gw(o)["listen"].as_object()["path"] = "model.sock"; }),
                    "expected an absolute path"));
  EXPECT_TRUE(named(refusal([&](auto& o) { eg(o)["allowed"] = "github.com:443"; }), "\"allowed\""));
  for (const char* bad : {"github.com", "github.com:", ":443", "github.com:0", "github.com:65536", "a:b:443",
                          "[::1:443", "github.com:44x"})
    EXPECT_TRUE(named(refusal([&](auto& o) { eg(o)["allowed"] = boost::json::array{bad}; }), "expected \"host:port\""))
        << bad;
  EXPECT_TRUE(named(refusal([&](auto& o) {
                      boost::json::array many;
                      for (int i = 0; i < 5000; ++i)
                        many.emplace_back("h" + std::to_string(i) + ":443");
                      eg(o)["allowed"] = std::move(many);
                    }),
                    "over the bound"));
  EXPECT_TRUE(named(refusal([&](auto& o) { eg(o).erase("listen"); }), "\"listen\""));
  EXPECT_TRUE(named(refusal([&](auto& o) { o["run_user"] = boost::json::object{{"uid", 1}}; }), "\"gid\""));
}

TEST(SupervisorSpec, ASocketDeeperThanAUnixAddressHoldsIsReachedThroughItsDirectory) {
  int fd = 0;
  EXPECT_EQ(reachable_socket_path("/tmp/x/supervisor.sock", fd), "/tmp/x/supervisor.sock");
  EXPECT_EQ(fd, -1);
  fs::path deep = fs::temp_directory_path() / ("mh-deep-" + std::to_string(::getpid())) / std::string(120, 'd');
  fs::create_directories(deep);
  std::string via = reachable_socket_path(deep / "supervisor.sock", fd);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(via, "/proc/self/fd/" + std::to_string(fd) + "/supervisor.sock");
  EXPECT_LE(via.size(), 107u);
  ::close(fd);
  EXPECT_EQ(reachable_socket_path(deep / "missing" / "supervisor.sock", fd), "") << "its directory cannot be opened";
  fs::remove_all(deep.parent_path());
}

}  // namespace
}  // namespace mh::supervisor
