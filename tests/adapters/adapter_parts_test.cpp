// The small parts both adapters are built from (adapters/adapter.hpp): the start of a harness
// capability table, operations with a vendor's aliases, and a transcript framed as the live run
// frames it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "adapters/adapter.hpp"
#include "adapters/host_config.hpp"
#include "adapters/offline.hpp"
#include "adapters/registry.hpp"
#include "adapters/vendor_descriptor.hpp"
#include "metaharness/build_info.hpp"

namespace mh::adapters {
namespace {

namespace proto = mh::protocol;

TEST(HarnessCapabilities, DeliverEveryTierAndDecisionModeWithThePinnedVersions) {
  for (std::string_view id : {"claude", "codex"}) {
    auto t = harness_capabilities(id);
    EXPECT_EQ(t.adapter_id, id);
    EXPECT_EQ(t.adapter_class, proto::AdapterClass::harness);
    std::vector<std::string> pinned;
    for (const auto& pin : build_info::vendor_pins)
      if (pin.adapter == id) pinned.emplace_back(pin.version);
    EXPECT_EQ(t.versions_pinned, pinned) << id;
    EXPECT_FALSE(t.versions_pinned.empty()) << id << " has a pin";
    for (auto tier : {proto::Tier::registration, proto::Tier::call, proto::Tier::turn, proto::Tier::kill})
      EXPECT_EQ(t.tier(tier), proto::TierStatus::delivered);
    for (auto mode : {proto::DecisionMode::frame, proto::DecisionMode::ask, proto::DecisionMode::observe})
      EXPECT_EQ(t.decision_mode(mode), proto::TierStatus::delivered);
    EXPECT_TRUE(t.commands.empty()) << "the commands are the adapter's own";
  }
}

// Every vendor is registered once, from its descriptor: the registry's adapters are the
// descriptors' in order, each pinned in vendor/pins, and each descriptor names its own adapter.
TEST(VendorDescriptors, TheRegistryIsMadeFromThemAndEachIsPinnedAndFindable) {
  const auto& vendors = vendor_descriptors();
  ASSERT_FALSE(vendors.empty());
  AdapterRegistry registry(HostConfig{});
  const auto ids = registry.ids();
  ASSERT_EQ(ids.size(), vendors.size());
  for (std::size_t i = 0; i < vendors.size(); ++i) {
    const VendorDescriptor& d = *vendors[i];
    EXPECT_EQ(ids[i], d.id);
    EXPECT_EQ(find_vendor(d.id), &d);
    EXPECT_FALSE(d.atif_agent_name.empty()) << d.id;
    EXPECT_FALSE(d.binary_under_vendor_dir.empty()) << d.id;
    EXPECT_EQ(d.default_binary("/v"), std::filesystem::path("/v") / d.binary_under_vendor_dir);
    bool pinned = false;
    for (const auto& pin : build_info::vendor_pins)
      pinned |= pin.adapter == d.id;
    EXPECT_TRUE(pinned) << d.id << " has no line in vendor/pins";
  }
  EXPECT_EQ(find_vendor("no-such-vendor"), nullptr);
}

// A new wire command is refused by default: a command no adapter's table declares (each command
// taken out of each registered adapter's table in turn, as a command added to the wire after the
// tables were written would be) is refused UNSUPPORTED_CONTROL by name, at start for a spec that
// requires it and by the table every command goes through first (RunCore::dispatch asks
// capabilities().command() before any handler), so only adapters that honour it change.
// A program that ships with metaharness is found beside the running binary (a build tree), else
// in the package's helper folder: so the packaged config names no vendor's hook program, and an
// installed daemon (/usr/bin/metaharness) still finds /usr/lib/metaharness/mh-codex-hook.
TEST(HelperPrograms, AHelperBesideTheBinaryIsThatOneAndOneNotBesideItIsThePackagedOne) {
  const auto dir = std::filesystem::temp_directory_path() / ("mh-helper-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "mh-some-hook") << "#!/bin/sh\n";
  EXPECT_EQ(helper_program(dir, "mh-some-hook"), dir / "mh-some-hook");
  EXPECT_EQ(helper_program(dir, "mh-other-hook"),
            std::filesystem::path(build_info::packaged_helper_dir) / "mh-other-hook");
  EXPECT_EQ(helper_program(std::filesystem::path(), "mh-some-hook"),
            std::filesystem::path(build_info::packaged_helper_dir) / "mh-some-hook");
  EXPECT_EQ(build_info::packaged_helper_dir, "/usr/lib/metaharness") << "where packaging/build-deb.sh installs them";
  std::filesystem::remove_all(dir);
}

// Every vendor's helper in the host's default config: beside this test binary's metaharness build
// (build/bin), where the build puts it.
TEST(HelperPrograms, EachVendorsHelperIsFoundWhereTheBuildPutsIt) {
  const HostConfig config = host_config_from_environment();
  for (const VendorDescriptor* vendor : vendor_descriptors())
    for (const VendorHelper& helper : vendor->helpers) {
      if (std::getenv(std::string(helper.env).c_str())) continue;  // the environment's choice
      const auto found = config.binaries.find(std::string(helper.binary_key));
      ASSERT_NE(found, config.binaries.end()) << helper.binary_key;
      EXPECT_EQ(found->second.filename(), helper.file_name);
    }
}

TEST(CapabilityTables, ACommandAnAdapterDoesNotDeclareIsRefusedUnsupportedControlByName) {
  AdapterRegistry registry(HostConfig{});
  for (std::string_view id : registry.ids()) {
    for (std::size_t i = 0; i <= static_cast<std::size_t>(proto::CommandName::halt); ++i) {
      const auto name = static_cast<proto::CommandName>(i);
      proto::CapabilityTable table = registry.find(id)->capabilities();
      table.commands.erase(name);
      const std::string what = std::string(id) + " without " + std::string(proto::to_string(name));
      const proto::CommandSupport support = table.command(name);
      EXPECT_FALSE(support.honoured) << what;
      EXPECT_EQ(support.code, proto::RefusalCode::UNSUPPORTED_CONTROL) << what;
      const std::string reason = "the " + std::string(id) + " adapter cannot honour " +
                                 std::string(proto::to_string(name)) + ": not in the capability table";
      EXPECT_EQ(table.refusal_reason(name), reason) << what;
      RunSpec spec;
      spec.requires_commands = {name};
      const auto refused = refuse_unhonoured_commands(spec, table);
      bool found = false;
      for (const auto& r : refused)
        if (r.id == "start/" + std::string(proto::to_string(name))) {
          found = true;
          ASSERT_TRUE(r.outcome.refusal.has_value()) << what;
          EXPECT_EQ(r.outcome.refusal->code, proto::RefusalCode::UNSUPPORTED_CONTROL) << what;
          EXPECT_EQ(r.outcome.refusal->reason, reason) << what;
        }
      EXPECT_TRUE(found) << what << ": a spec requiring it is not refused at start";
    }
  }
}

// Parking (issue 27 §5): a spec with park_after_ms is refused at start by name (start/park,
// UNSUPPORTED_CONTROL) on every adapter whose table does not honour it: the shared table refuses
// by default and only Claude declares it. Without park_after_ms (or 0) nothing is refused.
// The adapters whose CLI was asked whether a pending call survives to a later process.
constexpr std::string_view kParkingMeasured[] = {"codex", "gemini", "opencode", "qwen"};

TEST(CapabilityTables, ParkingIsRefusedAtStartByNameUnlessTheAdapterHonoursIt) {
  AdapterRegistry registry(HostConfig{});
  EXPECT_FALSE(harness_capabilities("any").parking.honoured) << "the shared default refuses parking";
  for (std::string_view id : registry.ids()) {
    const proto::CapabilityTable& table = registry.find(id)->capabilities();
    EXPECT_EQ(table.parking.honoured, id == "claude") << id;
    RunSpec spec;
    for (std::optional<std::uint64_t> unset : {std::optional<std::uint64_t>{}, std::optional<std::uint64_t>{0}}) {
      spec.park_after_ms = unset;
      for (const auto& r : refuse_unhonoured_commands(spec, table))
        EXPECT_NE(r.id, "start/park") << id;
    }
    spec.park_after_ms = 60000;
    const auto refused = refuse_unhonoured_commands(spec, table);
    auto park = std::find_if(refused.begin(), refused.end(), [](const auto& r) { return r.id == "start/park"; });
    if (table.parking.honoured) {
      EXPECT_EQ(park, refused.end()) << id;
      continue;
    }
    // Where a real CLI was asked (tests/codex/codex_park_test.cpp, tests/gemini/gemini_park_test.cpp,
    // tests/qwen/qwen_park_test.cpp, tests/opencode/opencode_park_test.cpp), the refusal says what that
    // CLI does, not the shared default's "no way is known".
    if (std::find(std::begin(kParkingMeasured), std::end(kParkingMeasured), id) != std::end(kParkingMeasured)) {
      EXPECT_NE(table.parking.note, harness_capabilities("any").parking.note) << id << ": the generic refusal";
    }
    ASSERT_NE(park, refused.end()) << id << ": a spec with park_after_ms is not refused at start";
    ASSERT_TRUE(park->outcome.refusal.has_value()) << id;
    EXPECT_EQ(park->outcome.refusal->code, proto::RefusalCode::UNSUPPORTED_CONTROL) << id;
    EXPECT_NE(park->outcome.refusal->reason.find("the " + std::string(id) + " adapter cannot honour park_after_ms"),
              std::string::npos)
        << park->outcome.refusal->reason;
  }
}

TEST(OperationsWith, AddTheAliasesInVocabularyOrder) {
  proto::CapabilityTable t;
  t.rendering = {{"shell", "Bash"}, {"file.edit", "Edit"}};
  auto ops = operations_with(t, "Bash", {proto::OpKind::file_edit});
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_LT(ops[0].op, ops[1].op);
  EXPECT_EQ(operations_with(t, "Bash", {}).size(), 1u);
  EXPECT_EQ(operations_with(t, "Unknown", {proto::OpKind::shell}).size(), 1u) << "an alias alone still counts";
}

TEST(ReadTranscript, FramesEveryLineWithTheLiveBoundAndDigestsAnOversizedOne) {
  std::string huge(proto::kDefaultMaxVendorLineBytes + 1, 'x');
  std::string transcript = "{\"a\":1}\n\n" + huge + "\n{\"b\":2}";
  std::vector<std::pair<std::uint64_t, bool>> seen;
  std::string digest;
  read_transcript(transcript, [&](const proto::FramedLine& line) {
    seen.emplace_back(line.number, line.too_long);
    if (line.too_long) digest = line.digest;
  });
  EXPECT_EQ(seen, (std::vector<std::pair<std::uint64_t, bool>>{{1, false}, {2, false}, {3, true}, {4, false}}))
      << "blank and unterminated lines count";
  EXPECT_EQ(digest, proto::sha256_hex(huge));
}

// run.limits: each one optional and bounded; an unknown key, a non-integer or a value out of
// bounds is refused naming the limit; spec.json keeps what was asked.
TEST(RunSpecLimits, AreReadBoundedAndRefusedByName) {
  auto parse = [](const std::string& limits) {
    auto v = proto::parse_json(R"({"adapter":"claude","prompt":"go","limits":)" + limits + "}");
    EXPECT_TRUE(v && v->is_object());
    return spec_from_json(v->get_object());
  };
  auto none = parse("{}");
  ASSERT_TRUE(none) << none.error();
  EXPECT_FALSE(none->limits.memory_max_bytes || none->limits.pids_max || none->limits.cpu_max_percent);
  auto all = parse(R"({"memory_max_bytes":536870912,"pids_max":64,"cpu_max_percent":150})");
  ASSERT_TRUE(all) << all.error();
  EXPECT_EQ(all->limits.memory_max_bytes, 536870912u);
  EXPECT_EQ(all->limits.pids_max, 64u);
  EXPECT_EQ(all->limits.cpu_max_percent, 150u);
  auto json = spec_to_json(*all);
  EXPECT_EQ(proto::canonical_json(json.as_object().at("limits")),
            R"({"cpu_max_percent":150,"memory_max_bytes":536870912,"pids_max":64})");
  auto one = parse(R"({"pids_max":8})");
  ASSERT_TRUE(one) << one.error();
  EXPECT_FALSE(one->limits.memory_max_bytes);
  EXPECT_EQ(one->limits.pids_max, 8u);

  struct Bad {
    const char* limits;
    const char* names;
  };
  for (const Bad& bad :
       {Bad{R"({"memory_max_bytes":1000})", "limits.memory_max_bytes is 1000"},
        Bad{R"({"memory_max_bytes":"2G"})", "limits.memory_max_bytes is"},
        Bad{R"({"pids_max":0})", "limits.pids_max is 0"}, Bad{R"({"pids_max":-1})", "limits.pids_max is"},
        Bad{R"({"pids_max":99999999})", "limits.pids_max is 99999999"},
        Bad{R"({"cpu_max_percent":1.5})", "limits.cpu_max_percent is"},
        Bad{R"({"cpu_max_percent":4294967396})", "limits.cpu_max_percent is 4294967396"},
        Bad{R"({"swap_max":1})", "unknown key \"swap_max\""}}) {
    auto refused = parse(bad.limits);
    ASSERT_FALSE(refused) << bad.limits;
    EXPECT_NE(refused.error().find(bad.names), std::string::npos) << refused.error();
  }
  auto not_object = parse("5");
  EXPECT_FALSE(not_object) << "limits must be an object";
}

// `--limit KEY=VALUE` (run, plan, submit) reads by the same rules as the spec's `limits`.
TEST(RunSpecLimits, FromTextReadTheSameBoundsAndRefuseByName) {
  RunLimits limits;
  std::string error;
  EXPECT_TRUE(set_limit(limits, "pids_max", "64", error)) << error;
  EXPECT_TRUE(set_limit(limits, "cpu_max_percent", "250", error)) << error;
  EXPECT_EQ(limits.pids_max, 64u);
  EXPECT_EQ(limits.cpu_max_percent, 250u);
  EXPECT_FALSE(limits.memory_max_bytes);
  EXPECT_TRUE(any_limit(limits));
  EXPECT_EQ(proto::canonical_json(limits_to_json(limits)), R"({"cpu_max_percent":250,"pids_max":64})");
  for (auto [key, value, names] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"swap_max", "1", "unknown limit \"swap_max\""},
           {"pids_max", "-1", "limit pids_max must be a whole number"},
           {"pids_max", "", "limit pids_max must be a whole number"},
           {"memory_max_bytes", "2G", "limit memory_max_bytes must be a whole number"},
           {"memory_max_bytes", "1000", "limit memory_max_bytes is 1000; expected 1048576 to"},
           {"cpu_max_percent", "100001", "limit cpu_max_percent is 100001; expected 1 to 100000"},
           {"cpu_max_percent", "99999999999999999999", "must be a whole number"}}) {
    RunLimits untouched;
    EXPECT_FALSE(set_limit(untouched, key, value, error)) << key << "=" << value;
    EXPECT_NE(error.find(names), std::string::npos) << error;
    EXPECT_FALSE(any_limit(untouched)) << "a refused limit sets nothing";
  }
}

// One rule of bounds for every source of a limit (spec, command line, the daemon's runs.*).
TEST(RunSpecLimits, EachKeyHasItsInclusiveBoundsAndAnUnknownKeyNone) {
  auto memory = limit_bounds("memory_max_bytes");
  ASSERT_TRUE(memory);
  EXPECT_EQ(memory->low, RunLimits::kMemoryMin);
  EXPECT_EQ(memory->high, RunLimits::kMemoryMax);
  EXPECT_TRUE(memory->holds(RunLimits::kMemoryMin));
  EXPECT_FALSE(memory->holds(RunLimits::kMemoryMin - 1));
  auto pids = limit_bounds("pids_max");
  ASSERT_TRUE(pids);
  EXPECT_EQ(pids->text(), "1 to " + std::to_string(RunLimits::kPidsMax));
  EXPECT_FALSE(pids->holds(0));
  auto cpu = limit_bounds("cpu_max_percent");
  ASSERT_TRUE(cpu);
  EXPECT_TRUE(cpu->holds(RunLimits::kCpuPercentMax));
  EXPECT_FALSE(cpu->holds(RunLimits::kCpuPercentMax + 1));
  EXPECT_FALSE(limit_bounds("swap_max"));
}

}  // namespace
}  // namespace mh::adapters
