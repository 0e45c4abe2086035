// `metaharness vendor install`: npm is asked for exactly the pins that are not in place, the result
// is checked against the pins, a folder already on pin is left untouched, and every failure is
// refused by name. npm here is a stand-in on PATH that records how it was called (the real npm
// and registry were exercised by hand, see docs/install.md); the on-pin case reads the real CLIs.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "adapters/registry.hpp"
#include "adapters/vendor_descriptor.hpp"
#include "daemon/model/scenario.hpp"
#include "protocol/digest.hpp"
#include "protocol/json.hpp"
#include "tests/systemd/package_support.hpp"

extern char** environ;

namespace mh::test {
namespace {

namespace fs = std::filesystem;

struct Pin {
  std::string adapter, package, version;
};

std::vector<Pin> pins() {
  std::vector<Pin> out;
  std::istringstream in(read_file(source_dir() / "vendor/pins"));
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] < 'a' || line[0] > 'z') continue;
    std::istringstream fields(line);
    Pin p;
    fields >> p.adapter >> p.package >> p.version;
    out.push_back(p);
  }
  return out;
}

// Records its working directory and arguments (each call appended); then fails (NPM_EXIT), or
// installs each package@version argument (at NPM_VERSION when set) with the native binary its
// adapter runs, and leaves a lock file as npm does.
const char* kFakeNpm = R"SH(#!/bin/sh
printf '%s\n' "$PWD" "$@" >> "$NPM_LOG"
if [ -n "$NPM_EXIT" ]; then echo "npm: failing as told" >&2; exit "$NPM_EXIT"; fi
for spec in "$@"; do
  case "$spec" in -*|install) continue ;; esac
  pkg="${spec%@*}"; ver="${NPM_VERSION:-${spec##*@}}"
  mkdir -p "node_modules/$pkg"
  printf '{"name":"%s","version":"%s"}\n' "$pkg" "$ver" > "node_modules/$pkg/package.json"
  case "$pkg" in
    @anthropic-ai/claude-code) b=node_modules/@anthropic-ai/claude-code-linux-x64/claude ;;
    @openai/codex) b=node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex ;;
    opencode-ai) b=node_modules/opencode-linux-x64/bin/opencode ;;
    @google/gemini-cli) b=node_modules/@google/gemini-cli/bundle/gemini.js ;;
    @qwen-code/qwen-code) b=node_modules/@qwen-code/qwen-code/cli-entry.js ;;
    *) continue ;;
  esac
  mkdir -p "$(dirname "$b")"
  printf '#!/bin/sh\n' > "$b"; chmod +x "$b"
done
printf '{"lockfileVersion":3}\n' > package-lock.json
)SH";

class VendorInstall : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir.path() / "bin");
    fs::create_directories(dir.path() / "nobin");
    // The few tools the stand-in uses, and no real npm (merged /usr: /bin and /usr/bin have it).
    fs::create_directories(dir.path() / "tools");
    for (const char* tool : {"mkdir", "dirname", "chmod"})
      fs::create_symlink(fs::path("/usr/bin") / tool, dir.path() / "tools" / tool);
    std::ofstream(dir.path() / "bin/npm") << kFakeNpm;
    fs::permissions(dir.path() / "bin/npm", fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
  }

  // The verb with PATH holding only the stand-in npm (or no npm) and the tools it uses.
  Output install(const fs::path& target, std::vector<std::string> extra_env = {}, bool with_npm = true) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      std::string entry(*e);
      if (entry.rfind("PATH=", 0) == 0 || entry.rfind("METAHARNESS_VENDOR_DIR=", 0) == 0) continue;
      env.push_back(entry);
    }
    env.push_back("PATH=" + (dir.path() / (with_npm ? "bin" : "nobin")).string() + ":" +
                  (dir.path() / "tools").string());
    env.push_back("NPM_LOG=" + npm_log().string());
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    CliProcess p({metaharness_binary().string(), "vendor", "install", "--dir", target.string()}, env);
    p.close_stdin();
    Output o;
    o.status = p.finish(60s);
    for (const auto& l : p.events())
      o.out += l.raw + "\n";
    o.err = p.stderr_text();
    return o;
  }

  fs::path npm_log() const { return dir.path() / "npm.log"; }
  std::vector<std::string> npm_call() const { return read_lines(npm_log()); }

  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
};

TEST_F(VendorInstall, AFolderWithNothingAsksNpmForEveryPinAndReportsEachInstalled) {
  auto target = dir.path() / "vendor";
  auto o = install(target);
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  auto call = npm_call();
  ASSERT_FALSE(call.empty()) << "npm was not run";
  EXPECT_EQ(fs::path(call[0]), target) << "npm runs in the folder";
  EXPECT_EQ(call[1], "install");
  EXPECT_NE(std::find(call.begin(), call.end(), "--save-exact"), call.end());
  for (const auto& p : pins()) {
    EXPECT_NE(std::find(call.begin(), call.end(), p.package + "@" + p.version), call.end()) << p.package;
    EXPECT_NE(o.out.find(p.adapter + ": " + p.package + " " + p.version + " installed in " + target.string()),
              std::string::npos)
        << o.out;
  }
  EXPECT_NE(o.out.find("vendor install: "), std::string::npos) << "it says what it runs: " << o.out;
  // npm installs into a manifest of the folder's own, not an enclosing project.
  EXPECT_NE(read_file(target / "package.json").find("metaharness-vendor-clis"), std::string::npos);
  // opencode's seam plugin package, at opencode's own version, in a folder of its own.
  std::string opencode_version;
  for (const auto& p : pins())
    if (p.adapter == "opencode") opencode_version = p.version;
  ASSERT_FALSE(opencode_version.empty());
  const auto plugin_dir = target / "opencode-plugin";
  EXPECT_NE(std::find(call.begin(), call.end(), plugin_dir.string()), call.end()) << "npm ran in " << plugin_dir;
  EXPECT_NE(std::find(call.begin(), call.end(), "@opencode-ai/plugin@" + opencode_version), call.end());
  EXPECT_TRUE(fs::exists(plugin_dir / "node_modules/@opencode-ai/plugin/package.json"));
  EXPECT_NE(read_file(plugin_dir / "package.json").find("metaharness-opencode-seam"), std::string::npos);
  EXPECT_NE(o.out.find("opencode seam plugin: @opencode-ai/plugin@" + opencode_version + " installed in"),
            std::string::npos)
      << o.out;
  // What it installed is recorded (issue 27 section 6): each binary an adapter runs, resolved,
  // with its sha256, the pinned package and its manifest's version.
  auto record = protocol::parse_json(read_file(target / "installed.json"));
  ASSERT_TRUE(record && record->is_object()) << read_file(target / "installed.json");
  EXPECT_EQ(record->at("format"), "metaharness.vendor-install/1");
  const auto& binaries = record->at("binaries").as_array();
  const auto all = pins();
  ASSERT_EQ(binaries.size(), all.size());
  for (std::size_t i = 0; i < binaries.size(); ++i) {
    const auto& b = binaries[i].as_object();
    const auto& p = all[i];
    EXPECT_EQ(b.at("adapter").as_string(), p.adapter);
    EXPECT_EQ(b.at("package").as_string(), p.package);
    EXPECT_EQ(b.at("version").as_string(), p.version);
    const auto* vendor = adapters::find_vendor(p.adapter);
    ASSERT_NE(vendor, nullptr) << p.adapter;
    EXPECT_EQ(b.at("path").as_string(), fs::canonical(vendor->default_binary(target)).string());
    EXPECT_EQ(b.at("sha256").as_string(), protocol::sha256_hex("#!/bin/sh\n")) << "the stand-in's binary";
  }
  EXPECT_NE(o.out.find("vendor install: recorded the sha256 of the "), std::string::npos) << o.out;
}

TEST_F(VendorInstall, AFolderAlreadyOnEveryPinIsLeftUntouchedAndNpmIsNotRun) {
  auto real = source_dir() / ".vendor";
  ASSERT_TRUE(fs::exists(real / "node_modules")) << "the pinned vendor CLIs (./run setup) are needed";
  auto target = dir.path() / "vendor";
  fs::create_directories(target);
  fs::create_directory_symlink(fs::canonical(real / "node_modules"), target / "node_modules");
  ASSERT_TRUE(fs::exists(real / "opencode-plugin/package-lock.json")) << "opencode's plugin package (./run setup)";
  fs::create_directory_symlink(fs::canonical(real / "opencode-plugin"), target / "opencode-plugin");
  auto o = install(target, {"NPM_EXIT=1"});
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_FALSE(fs::exists(npm_log())) << "npm was run";
  EXPECT_FALSE(fs::exists(target / "package.json")) << "nothing is written";
  for (const auto& p : pins())
    EXPECT_NE(o.out.find(p.adapter + ": " + p.package + " " + p.version + " already in"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("vendor install: nothing to do"), std::string::npos) << o.out;
  // The binaries in place, named by no record yet, are recorded once, and said to be as found.
  EXPECT_NE(o.out.find("(as found in place: no record named them)"), std::string::npos) << o.out;
  ASSERT_TRUE(fs::exists(target / "installed.json"));
  const auto recorded = read_file(target / "installed.json");
  const auto written = fs::last_write_time(target / "installed.json");
  // Again: the record names every pin, so nothing at all is written.
  auto again = install(target, {"NPM_EXIT=1"});
  ASSERT_EQ(again.status, 0) << again.out << again.err;
  EXPECT_EQ(again.out.find("recorded"), std::string::npos) << again.out;
  EXPECT_EQ(read_file(target / "installed.json"), recorded);
  EXPECT_EQ(fs::last_write_time(target / "installed.json"), written);
  // A record that is not one is refused by name and kept (it may be what says a binary changed).
  std::ofstream(target / "installed.json") << "{";
  auto torn = install(target, {"NPM_EXIT=1"});
  EXPECT_EQ(torn.status, 0) << "nothing was to be installed";
  EXPECT_NE(torn.err.find("the install record " + (target / "installed.json").string() + " is not a JSON object"),
            std::string::npos)
      << torn.err;
  EXPECT_EQ(read_file(target / "installed.json"), "{");
}

TEST_F(VendorInstall, OnlyThePinsNotInPlaceAreAskedFor) {
  auto all = pins();
  ASSERT_GE(all.size(), 2u);
  auto target = dir.path() / "vendor";
  fs::create_directories(target);
  // The first pin in place (by the stand-in itself), then a second install.
  CliProcess seed({"/bin/sh", "-c",
                   "cd \"$0\" && NPM_LOG=/dev/null \"$1\" install " + all[0].package + "@" + all[0].version,
                   target.string(), (dir.path() / "bin/npm").string()});
  ASSERT_EQ(seed.finish(30s), 0);
  auto o = install(target);
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  auto call = npm_call();
  EXPECT_EQ(std::find(call.begin(), call.end(), all[0].package + "@" + all[0].version), call.end());
  for (std::size_t i = 1; i < all.size(); ++i)
    EXPECT_NE(std::find(call.begin(), call.end(), all[i].package + "@" + all[i].version), call.end());
}

TEST_F(VendorInstall, NpmFailingIsRefusedByNameWithItsExitStatus) {
  auto o = install(dir.path() / "vendor", {"NPM_EXIT=3"});
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("npm failed with exit status 3"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("npm: failing as told"), std::string::npos) << "npm's own output is shown: " << o.err;
}

TEST_F(VendorInstall, WhatNpmLeavesIsCheckedAgainstThePins) {
  auto o = install(dir.path() / "vendor", {"NPM_VERSION=9.9.9"});
  EXPECT_EQ(o.status, 2);
  for (const auto& p : pins())
    EXPECT_NE(o.err.find("after npm, " + p.adapter + " is " + p.package + " 9.9.9 (the pin is " + p.version + ")"),
              std::string::npos)
        << o.err;
}

TEST_F(VendorInstall, NoNpmOnPathIsRefusedByNameAndNothingIsCreated) {
  auto target = dir.path() / "vendor";
  auto o = install(target, {}, /*with_npm=*/false);
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("npm is not on PATH"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(target));
}

// `vendor list` is what scripts loop over instead of naming vendors: every pinned adapter, one a
// line, in vendor/pins' order (registration order), and nothing else.
TEST(VendorList, PrintsEveryPinnedVendorOneALineInOrder) {
  CliProcess p({metaharness_binary().string(), "vendor", "list"});
  p.close_stdin();
  ASSERT_EQ(p.finish(30s), 0) << p.stderr_text();
  std::vector<std::string> listed;
  for (const auto& l : p.events())
    listed.push_back(l.raw);
  std::vector<std::string> pinned;
  for (const auto& pin : pins())
    pinned.push_back(pin.adapter);
  EXPECT_EQ(listed, pinned);
}

// `vendor list --helpers` is what the package installs beside the supervisor: each vendor's
// helper programs by file name, every one a program built beside metaharness.
TEST(VendorList, HelpersAreTheDescriptorsProgramsBuiltBesideMetaharness) {
  CliProcess p({metaharness_binary().string(), "vendor", "list", "--helpers"});
  p.close_stdin();
  ASSERT_EQ(p.finish(30s), 0) << p.stderr_text();
  std::vector<std::string> listed;
  for (const auto& l : p.events())
    listed.push_back(l.raw);
  std::vector<std::string> declared;
  for (const adapters::VendorDescriptor* v : adapters::vendor_descriptors())
    for (const adapters::VendorHelper& h : v->helpers)
      declared.emplace_back(h.file_name);
  EXPECT_EQ(listed, declared);
  EXPECT_FALSE(listed.empty()) << "a vendor with a hook program declares it";
  for (const auto& name : listed)
    EXPECT_EQ(::access((metaharness_binary().parent_path() / name).c_str(), X_OK), 0) << name;
}

// `vendor list --json` is what drivers read instead of keeping a table of vendors (the soak,
// scripts/make_seam_scenario.sh): each registered vendor, in registration order, with its
// descriptor's facts; every vendor declares a shell tool a scripted model can call and the process
// that is its CLI, so a driver can play and find any of them.
TEST(VendorList, JsonGivesEachVendorsDescriptorFactsInRegistrationOrder) {
  CliProcess p({metaharness_binary().string(), "vendor", "list", "--json"});
  p.close_stdin();
  ASSERT_EQ(p.finish(30s), 0) << p.stderr_text();
  ASSERT_EQ(p.events().size(), 1u) << "one JSON array on one line";
  const auto parsed = protocol::parse_json(p.events().front().raw);
  ASSERT_TRUE(parsed && parsed->is_array()) << p.events().front().raw;
  const auto& listed = parsed->as_array();
  const auto& declared = adapters::vendor_descriptors();
  ASSERT_EQ(listed.size(), declared.size());
  const adapters::AdapterRegistry registry(adapters::host_config_from_environment());
  for (std::size_t i = 0; i < declared.size(); ++i) {
    const adapters::VendorDescriptor& v = *declared[i];
    const auto& o = listed[i].as_object();
    SCOPED_TRACE(std::string(v.id));
    EXPECT_EQ(o.at("id").as_string(), v.id);
    ASSERT_NE(registry.find(v.id), nullptr);
    EXPECT_EQ(o.at("model_wire").as_string(), registry.find(v.id)->model_wire());
    // The wire a driver's scenario serves the vendor on: one a scenario's "wires" names.
    ASSERT_TRUE(o.at("scenario_wire").is_string()) << o.at("scenario_wire");
    const std::string_view scenario_wire = o.at("scenario_wire").as_string();
    EXPECT_TRUE(std::any_of(model::kWires.begin(), model::kWires.end(), [&](model::Wire w) {
      return model::to_string(w) == scenario_wire;
    })) << scenario_wire;
    EXPECT_EQ(o.at("over_acp").as_bool(), v.over_acp);
    const auto& names = o.at("process_names").as_array();
    ASSERT_EQ(names.size(), v.process_names.size());
    EXPECT_FALSE(names.empty()) << "a driver finds the CLI's process by its name";
    for (std::size_t n = 0; n < names.size(); ++n)
      EXPECT_EQ(names[n].as_string(), v.process_names[n]);
    const auto& shell = o.at("scripted_shell").as_object();
    EXPECT_EQ(shell.at("tool").as_string(), v.scripted_shell.tool);
    EXPECT_FALSE(shell.at("tool").as_string().empty());
    EXPECT_EQ(shell.at("command_key").as_string(), v.scripted_shell.command_key);
    EXPECT_FALSE(shell.at("command_key").as_string().empty());
    EXPECT_EQ(shell.at("call_id_prefix").as_string(), v.scripted_shell.call_id_prefix);
    EXPECT_NE(std::string_view(shell.at("reported_call_id").as_string()).find("{id}"), std::string_view::npos);
    EXPECT_EQ(shell.at("side_requests").as_bool(), v.scripted_shell.side_requests);
    EXPECT_EQ(o.at("helpers").as_array().size(), v.helpers.size());
  }
}

// --json and --helpers are two answers to two questions: asked together, refused by name.
TEST(VendorList, JsonWithHelpersIsRefused) {
  CliProcess p({metaharness_binary().string(), "vendor", "list", "--json", "--helpers"});
  p.close_stdin();
  EXPECT_NE(p.finish(30s), 0);
  EXPECT_NE(p.stderr_text().find("--helpers excludes --json"), std::string::npos) << p.stderr_text();
  EXPECT_TRUE(p.events().empty()) << "nothing listed";
}

}  // namespace
}  // namespace mh::test
