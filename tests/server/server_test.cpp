// The daemon's configuration, its systemd units, and the readable tail format.
#include <gtest/gtest.h>

#include <fstream>

#include "daemon/server/socket_api.hpp"
#include "metaharness/build_info.hpp"
#include "protocol/event_text.hpp"
#include "tests/support/config_text.hpp"

namespace mh::test {
namespace {

std::optional<std::string> load_error(const std::string& toml) {
  auto c = load_config_text(toml, "config");
  if (c) return std::nullopt;
  return c.error();
}

TEST(Config, TheShippedExampleLoadsAndNoFileMeansEmbeddedDefaults) {
  auto shipped = daemon::load_config(source_dir() / "config/metaharness.toml");
  ASSERT_TRUE(shipped) << shipped.error();
  auto defaults = daemon::load_config(std::nullopt);
  ASSERT_TRUE(defaults);
  EXPECT_EQ(shipped->halt_grace, defaults->halt_grace);
  EXPECT_EQ(shipped->socket_mode, 0660u);
  EXPECT_FALSE(defaults->socket.empty());
  EXPECT_FALSE(defaults->state_dir.empty());
}

TEST(Config, SystemdDirectoriesDecideTheDefaultsUnderSystemd) {
  ::setenv("RUNTIME_DIRECTORY", "/run/metaharness", 1);
  ::setenv("STATE_DIRECTORY", "/var/lib/metaharness", 1);
  auto c = daemon::default_config();
  ::unsetenv("RUNTIME_DIRECTORY");
  ::unsetenv("STATE_DIRECTORY");
  EXPECT_EQ(c.socket, "/run/metaharness/metaharness.sock");
  EXPECT_EQ(c.state_dir, "/var/lib/metaharness");
}

TEST(Config, ABadConfigIsRefusedNamingTheKeyAndTheReason) {
  struct Case {
    const char* toml;
    const char* named;  // what the refusal must say
  };
  const Case cases[] = {
      {"[runs]\nhalt_grace = 5\n", "runs.halt_grace"},                                   // unknown key
      {"[runs]\nhalt_grace_ms = \"soon\"\n", "runs.halt_grace_ms: must be an integer"},  // type
      {"[runs]\nhalt_grace_ms = 0\n", "runs.halt_grace_ms: must be positive"},           // range
      {"[network]\nport = 1\n", "unknown key network"},                                  // table
      {"[runs\n", "line 1"},                                                             // syntax
      {"[paths]\nsocket_mode = \"rw\"\n", "paths.socket_mode"},
      {"[access]\ncontrol_uids = [\"alice\"]\n", "access.control_uids"},
  };
  for (const Case& c : cases) {
    auto error = load_error(c.toml);
    ASSERT_TRUE(error) << c.toml;
    EXPECT_NE(error->find(c.named), std::string::npos) << *error;
  }
}

// Every adapter the build pins has its own `[vendor]` key naming its binary (the daemon's way to
// point a run at another build, as METAHARNESS_<ADAPTER>_BIN is a one-shot run's), and the
// config example lists each; a key for no adapter is still refused by name.
TEST(Config, EveryPinnedAdapterHasAVendorKeyNamingItsBinary) {
  const std::string example = read_file(source_dir() / "config/metaharness.toml");
  for (const auto& pin : build_info::vendor_pins) {
    const std::string adapter(pin.adapter);
    const std::string binary = "/opt/elsewhere/" + adapter + "-build";
    auto c = load_config_text("[vendor]\n" + adapter + " = \"" + binary + "\"\n");
    ASSERT_TRUE(c) << adapter << ": " << c.error();
    ASSERT_TRUE(c->vendor.binaries.count(adapter)) << adapter;
    EXPECT_EQ(c->vendor.binaries.at(adapter), binary);
    EXPECT_NE(example.find("\n# " + adapter + " = \""), std::string::npos)
        << "config/metaharness.toml documents [vendor] " << adapter;
  }
  auto error = load_error("[vendor]\nno_such_vendor = \"/bin/true\"\n");
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("vendor.no_such_vendor"), std::string::npos) << *error;
}

TEST(Config, TheDaemonRefusesABadConfigAtStartWithExitTwo) {
  TempDir dir("badconfig");
  std::ofstream(dir.path() / "c.toml") << "[log]\nlevel = \"loud\"\n";
  CliProcess p({metaharness_binary().string(), "daemon", "--config", (dir.path() / "c.toml").string(), "--socket",
                (dir.path() / "s").string(), "--state-dir", (dir.path() / "st").string()});
  EXPECT_EQ(p.finish(30s), 2);
  EXPECT_NE(p.stderr_text().find("log.level: must be one of error, warning, info, debug"), std::string::npos)
      << p.stderr_text();
}

TEST(Config, TheEventLineBoundDefaultsToOneMebibyteAndIsRefusedOutsideWhatEveryReaderTakes) {
  auto defaults = daemon::load_config(std::nullopt);
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults->max_event_line_bytes, 1048576u);
  TempDir dir("bound");
  std::ofstream(dir.path() / "ok.toml") << "[runs]\nmax_event_line_bytes = 16777216\n";
  auto largest = daemon::load_config(dir.path() / "ok.toml");
  ASSERT_TRUE(largest) << largest.error();
  EXPECT_EQ(largest->max_event_line_bytes, 16777216u);
  for (auto bad : {"1000", "16777217"}) {
    auto error = load_error(std::string("[runs]\nmax_event_line_bytes = ") + bad + "\n");
    ASSERT_TRUE(error) << bad;
    EXPECT_NE(error->find("runs.max_event_line_bytes: must be between 65536 and 16777216"), std::string::npos)
        << *error;
  }
}

TEST(Config, RolesNestAndTheOwnerIsAdminUnlessTheConfigSaysOtherwise) {
  daemon::DaemonConfig c;
  c.root_is_admin = false;  // access_config_test.cpp covers root
  c.observe.uids = {1001};
  c.control.gids = {2000};
  EXPECT_EQ(c.role_of(1001, std::set<std::uint32_t>{1}), daemon::Role::observe);
  EXPECT_EQ(c.role_of(1002, std::set<std::uint32_t>{2000}), daemon::Role::control);
  EXPECT_EQ(c.role_of(1003, std::set<std::uint32_t>{3}), daemon::Role::none);
  EXPECT_EQ(c.role_of(::geteuid(), std::set<std::uint32_t>{0}), daemon::Role::admin);
  c.owner_is_admin = false;
  EXPECT_EQ(c.role_of(::geteuid(), std::set<std::uint32_t>{12345}), daemon::Role::none);
}

// systemd-analyze verify, with the unit pointed at the binary under test. Any warning fails too.
TEST(Systemd, TheUnitsVerifyClean) {
  TempDir dir("systemd");
  std::string service = read_file(source_dir() / "systemd/metaharness.service");
  const std::string installed = "/usr/bin/metaharness";
  ASSERT_NE(service.find(installed), std::string::npos);
  for (auto at = service.find(installed); at != std::string::npos; at = service.find(installed, at + 1))
    service.replace(at, installed.size(), metaharness_binary().string());
  std::ofstream(dir.path() / "metaharness.service") << service;
  std::filesystem::copy_file(source_dir() / "systemd/metaharness.socket", dir.path() / "metaharness.socket");
  CliProcess verify({"/usr/bin/systemd-analyze", "verify", "--man=no", (dir.path() / "metaharness.service").string(),
                     (dir.path() / "metaharness.socket").string()});
  verify.close_stdin();
  EXPECT_EQ(verify.finish(60s), 0) << verify.stderr_text();
  EXPECT_EQ(verify.stderr_text(), "") << "systemd-analyze must have nothing to say";
  for (auto f : {"metaharness.sysusers.conf", "metaharness.tmpfiles.conf"})
    EXPECT_TRUE(std::filesystem::exists(source_dir() / "systemd" / f)) << f;
}

TEST(Systemd, TheServiceIsANotifyServiceWithTheHardeningTheIssueNames) {
  std::string service = read_file(source_dir() / "systemd/metaharness.service");
  for (auto needed : {"Type=notify", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
                      "StateDirectory=metaharness", "RuntimeDirectory=metaharness"})
    EXPECT_NE(service.find(needed), std::string::npos) << needed;
  std::string socket = read_file(source_dir() / "systemd/metaharness.socket");
  EXPECT_NE(socket.find("SocketMode=0660"), std::string::npos);
}

TEST(SocketApi, RequestsAreRefusedByName) {
  EXPECT_EQ(daemon::read_request("nope").error().code, "NOT_JSON");
  EXPECT_EQ(daemon::read_request("[1]").error().code, "NOT_JSON");
  EXPECT_EQ(daemon::read_request(R"({"request":"list"})").error().code, "UNKNOWN_FORMAT");
  auto unknown = daemon::read_request(R"({"format":"metaharness.socket/1","request":"fly","id":"x"})");
  EXPECT_EQ(unknown.error().code, "UNKNOWN_REQUEST");
  EXPECT_EQ(unknown.error().id, "x");
  EXPECT_NE(unknown.error().reason.find("submit, list"), std::string::npos);
  auto ok = daemon::read_request(R"({"format":"metaharness.socket/1","request":"tail","run_id":"r"})");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->name, "tail");
}

TEST(TailFormat, EachEventIsOneReadableLineWithItsGist) {
  auto line = protocol::human_line(
      R"({"format":"metaharness.event/1","seq":7,"run":"r","event":"tool.decided","call_id":"toolu_1","decision":{"decision":"deny","reason":"no shell here"},"decided_by":"frame","seam":"hook","latency_ms":null,"peer":null})");
  EXPECT_NE(line.find("7"), std::string::npos);
  EXPECT_NE(line.find("tool.decided"), std::string::npos);
  EXPECT_NE(line.find("deny \"no shell here\" by frame"), std::string::npos) << line;
  auto requested = protocol::human_line(
      R"({"format":"metaharness.event/1","seq":3,"run":"r","event":"tool.requested","call_id":"toolu_1","name":"Bash","input":{"command":"ls"},"decision_required":true,"deadline_ms":55000,"seam":"hook"})");
  EXPECT_NE(requested.find("Bash {\"command\":\"ls\"}"), std::string::npos) << requested;
  EXPECT_NE(requested.find("awaiting a decision"), std::string::npos) << requested;
  auto text = protocol::human_line(
      R"({"format":"metaharness.event/1","seq":4,"run":"r","at":"2026-11-29T17:53:37.377Z","event":"text","text":"line one\nline two","request_id":null})");
  EXPECT_EQ(text.substr(0, 12), "17:53:37.377") << "the vendor's own time when the event has one";
  EXPECT_NE(text.find("\"line one line two\""), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 0);
  EXPECT_EQ(protocol::human_line("not an event"), "not an event");
}

// The attack (an outside tester's): the model's text carried ESC sequences that, printed raw by
// `tail --human`, moved the cursor back over the pending call's line and rewrote it as a harmless
// command while the real call was another; another retitled the window. Every control character a
// terminal acts on is shown as text, in every field and in a line that is not an event.
TEST(TailFormat, AControlCharacterFromTheRunIsShownAsTextNeverPassedToTheTerminal) {
  auto spoof = protocol::human_line(
      R"({"format":"metaharness.event/1","seq":5,"run":"r","event":"text","text":"\u001b[2A\u001b[53G\u001b[K{\"command\":\"ls\"}\u0007\u009b31m\u007f","request_id":null})");
  for (char c : spoof) {
    const auto byte = static_cast<unsigned char>(c);
    EXPECT_FALSE(byte < 0x20 || byte == 0x7f) << "a control byte " << int(byte) << " in " << spoof;
  }
  EXPECT_EQ(spoof.find("\xc2\x9b"), std::string::npos) << "a C1 control (CSI) in " << spoof;
  EXPECT_NE(spoof.find(R"(\x1b[2A)"), std::string::npos) << spoof;
  EXPECT_NE(spoof.find(R"(\x07)"), std::string::npos) << spoof;
  EXPECT_NE(spoof.find(R"(\u009b31m)"), std::string::npos) << spoof;
  EXPECT_NE(spoof.find(R"(\x7f)"), std::string::npos) << spoof;
  auto title = protocol::human_line(
      R"({"format":"metaharness.event/1","seq":6,"run":"r","event":"tool.requested","call_id":"t\u001b]0;PWNED\u0007","name":"Bash","input":{"command":"ls"},"decision_required":false,"deadline_ms":null,"seam":"hook"})");
  EXPECT_EQ(title.find('\x1b'), std::string::npos) << title;
  EXPECT_EQ(protocol::human_line("not an event \x1b[2J"), R"(not an event \x1b[2J)");
  EXPECT_EQ(protocol::human_line("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93")
      << "other text stays as it is";
  // A right-to-left override reorders what follows it on the screen: shown as its code point.
  EXPECT_EQ(protocol::printable("rm \xe2\x80\xae-rf\xe2\x81\xa9"), R"(rm \u202e-rf\u2069)");
}

// The time shown is when the line was written (recorded_at), else the vendor's, never the time of
// printing: a stream read an hour later shows the run's own times.
TEST(TailFormat, TheTimeShownIsRecordedAtElseTheVendorsElseAPlaceholder) {
  auto both = protocol::human_line(
      R"({"format":"metaharness.event/1","seq":4,"run":"r","at":"2026-11-29T17:53:37.377Z","recorded_at":"2026-11-29T17:53:38.001Z","event":"text","text":"x","request_id":null})");
  EXPECT_EQ(both.substr(0, 12), "17:53:38.001") << both;
  auto recorded = protocol::human_line(
      R"({"format":"metaharness.event/1","seq":5,"run":"r","recorded_at":"2020-01-02T03:04:05.678Z","event":"turn.started","turn":1,"frame_digest":null})");
  EXPECT_EQ(recorded.substr(0, 12), "03:04:05.678") << recorded;
  auto neither = protocol::human_line(
      R"({"format":"metaharness.event/1","seq":6,"run":"r","event":"turn.started","turn":1,"frame_digest":null})");
  EXPECT_EQ(neither.substr(0, 12), "--:--:--.---") << neither;
}

TEST(TailFormat, ADecisionTakenOnTheViewerPageSaysSo) {
  auto line = protocol::human_line(
      R"({"format":"metaharness.event/1","seq":5,"run":"r","event":"tool.decided","call_id":"c1","decision":{"decision":"allow"},"decided_by":"embedder","seam":"hook","latency_ms":40,"peer":{"uid":1001,"pid":77,"via":"viewer"}})");
  EXPECT_NE(line.find("allow by embedder (uid 1001, pid 77, via viewer) after 40 ms"), std::string::npos) << line;
}

TEST(TailFormat, ALineTheWriterCutSaysSo) {
  auto line = protocol::human_line(
      R"({"format":"metaharness.event/1","seq":9,"run":"r","recorded_at":"2026-11-29T17:53:38.001Z","event":"tool.result","exit_code":0,"outcome_source":null,"call_id":"c1","is_error":false,"content":"ooo","bytes":1048898,"tool_use_result":null,"cut":[{"field":"content","pointer":"/content","form":"text","bytes":1048898,"kept":1048000,"digest":"0000000000000000000000000000000000000000000000000000000000000000"}]})");
  EXPECT_NE(line.find("[content cut: 1048000 of 1048898 bytes kept]"), std::string::npos) << line;
}

}  // namespace
}  // namespace mh::test
