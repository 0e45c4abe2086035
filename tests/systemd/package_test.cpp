// `./run package`'s .deb, read with dpkg-deb: its control fields and real Depends, what it ships
// and where, the conffile, the maintainer scripts, and a packaged binary that looks for the vendor
// CLIs where `vendor install` puts them.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/systemd/package_support.hpp"

namespace mh::test {
namespace {

namespace fs = std::filesystem;

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

class Package : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    work_ = new TempDir("package");
    deb_ = build_package(work_->path(), log_);
  }
  static void TearDownTestSuite() {
    delete work_;
    work_ = nullptr;
  }
  void SetUp() override { ASSERT_FALSE(deb_.empty()) << log_; }

  static Output dpkg_deb(std::vector<std::string> args) {
    args.insert(args.begin(), "/usr/bin/dpkg-deb");
    return run_command(std::move(args));
  }

  static inline TempDir* work_ = nullptr;
  static inline fs::path deb_;
  static inline std::string log_;
};

TEST_F(Package, ItIsNamedAndVersionedFromCMakeWithRealDepends) {
  EXPECT_EQ(deb_.parent_path(), build_dir()) << "./run package builds into build/";
  auto version = dpkg_deb({"-f", deb_.string(), "Version"});
  EXPECT_EQ(version.out, MH_TEST_PROJECT_VERSION);
  EXPECT_EQ(dpkg_deb({"-f", deb_.string(), "Package"}).out, "metaharness");
  auto arch = run_command({"/usr/bin/dpkg", "--print-architecture"});
  EXPECT_EQ(deb_.filename(), "metaharness_" + std::string(MH_TEST_PROJECT_VERSION) + "_" + arch.out + ".deb");
  auto depends = dpkg_deb({"-f", deb_.string(), "Depends"}).out;
  // The libraries (found by dpkg-shlibdeps), and what the package runs.
  for (auto needed : {"libboost-json1.81.0", "libssl3", "libtomlplusplus3", "libsystemd0", "libstdc++6", "libc6",
                      "systemd", "init-system-helpers", "bubblewrap", "nodejs", "npm", "ripgrep"})
    EXPECT_TRUE(has(depends, needed)) << needed << " missing from Depends: " << depends;
  // Gemini CLI 0.61.0 (vendor/pins) runs on Node.js 20 or later, the oldest any pinned vendor runs on.
  EXPECT_TRUE(has(depends, "nodejs (>= 20)")) << depends;
  EXPECT_TRUE(has(dpkg_deb({"-f", deb_.string(), "Description"}).out, "Gemini CLI, Qwen Code"));
}

TEST_F(Package, ItShipsTheBinariesUnitsUserDirectoriesConfigAndDocsAndNotTheStandIn) {
  auto contents = dpkg_deb({"-c", deb_.string()});
  ASSERT_EQ(contents.status, 0) << contents.err;
  for (auto path : {"./usr/bin/metaharness", "./usr/lib/metaharness/mh-codex-hook", "./usr/lib/metaharness/mh-exec",
                    "./usr/lib/metaharness/metaharness-supervisor", "./usr/lib/systemd/system/metaharness.service",
                    "./usr/lib/systemd/system/metaharness.socket", "./usr/lib/sysusers.d/metaharness.conf",
                    "./usr/lib/tmpfiles.d/metaharness.conf", "./etc/metaharness/metaharness.toml",
                    "./usr/share/doc/metaharness/install.md", "./usr/share/doc/metaharness/README.md",
                    "./usr/share/doc/metaharness/copyright", "./usr/share/doc/metaharness/metaharness.toml.example"})
    EXPECT_TRUE(has(contents.out, std::string(" ") + path + "\n") || contents.out.ends_with(path)) << path;
  EXPECT_FALSE(has(contents.out, "/mh-standin")) << "the stand-in harness is a test tool, not shipped";
  std::istringstream lines(contents.out);
  for (std::string line; std::getline(lines, line);)
    EXPECT_TRUE(has(line, " root/root ")) << "every file belongs to root: " << line;
  // Every doc the unit's Documentation= names is in the package.
  std::istringstream unit(read_file(source_dir() / "systemd/metaharness.service"));
  int documented = 0;
  for (std::string line; std::getline(unit, line);) {
    if (line.rfind("Documentation=", 0) != 0) continue;
    std::istringstream uris(line.substr(14));
    for (std::string uri; uris >> uri;) {
      ASSERT_EQ(uri.rfind("file:", 0), 0u) << uri;
      EXPECT_TRUE(has(contents.out, " ." + uri.substr(5) + "\n")) << uri << " is not in the package";
      ++documented;
    }
  }
  EXPECT_GT(documented, 0);
}

TEST_F(Package, TheConfigIsAConffileAndTheMaintainerScriptsAreThere) {
  auto conffiles = dpkg_deb({"-I", deb_.string(), "conffiles"});
  EXPECT_EQ(conffiles.out, "/etc/metaharness/metaharness.toml");
  for (auto script : {"postinst", "prerm", "postrm"}) {
    auto text = dpkg_deb({"-I", deb_.string(), script});
    EXPECT_EQ(text.status, 0) << script;
    EXPECT_TRUE(has(text.out, "#!/bin/sh")) << script;
  }
  auto postinst = dpkg_deb({"-I", deb_.string(), "postinst"}).out;
  for (auto step : {"systemd-sysusers metaharness.conf", "systemd-tmpfiles --create metaharness.conf", "daemon-reload",
                    "deb-systemd-helper enable 'metaharness.socket'"})
    EXPECT_TRUE(has(postinst, step)) << step;
  EXPECT_TRUE(has(dpkg_deb({"-I", deb_.string(), "prerm"}).out, "stop 'metaharness.socket' 'metaharness.service'"));
}

TEST_F(Package, ThePackagedBinaryLooksForTheVendorCLIsWhereVendorInstallPutsThem) {
  auto root = work_->path() / "extracted";
  ASSERT_EQ(dpkg_deb({"-x", deb_.string(), root.string()}).status, 0);
  auto binary = (root / "usr/bin/metaharness").string();
  EXPECT_EQ(run_command({binary, "--version"}).out, MH_TEST_PROJECT_VERSION);
  auto help = run_command({binary, "vendor", "install", "--help"});
  EXPECT_TRUE(has(help.out, "/var/lib/metaharness/vendor")) << help.out;
  // doctor, with nothing in the environment naming another folder, reads the packaged one.
  auto doctor = run_command(
      {"/usr/bin/env", "-u", "METAHARNESS_VENDOR_DIR", "-u", "METAHARNESS_CLAUDE_BIN", binary, "doctor", "claude"});
  EXPECT_TRUE(has(doctor.out, " /var/lib/metaharness/vendor/node_modules/")) << doctor.out << doctor.err;
  // A vendor's helper, which the packaged config no longer names, is looked for where the package
  // installs it (/usr/bin/metaharness has no mh-codex-hook beside it).
  auto codex = run_command({"/usr/bin/env", "-u", "METAHARNESS_CODEX_HOOK_BIN", binary, "doctor", "codex"});
  EXPECT_TRUE(has(codex.out, "codex: helper mh-codex-hook /usr/lib/metaharness/mh-codex-hook"))
      << codex.out << codex.err;
  EXPECT_FALSE(has(read_file(binary), source_dir().string() + "/.vendor")) << "no checkout path as a default";
}

// Issue 24 item 14: the ATIF validator is not only in a checkout. The package ships it with its
// schema, and the shipped pair passes a trajectory Harbor's models take and refuses one they
// refuse (step ids not from 1).
TEST_F(Package, ItShipsTheAtifValidatorWithItsSchemaAndTheyWorkFromThere) {
  auto root = work_->path() / "extracted-atif";
  ASSERT_EQ(dpkg_deb({"-x", deb_.string(), root.string()}).status, 0);
  const auto validator = root / "usr/share/metaharness/atif/atif_validate.py";
  const auto schema = root / "usr/share/metaharness/atif/atif-v1.8.schema.json";
  ASSERT_TRUE(fs::exists(validator) && fs::exists(schema));
  EXPECT_EQ(fs::status(validator).permissions() & fs::perms::others_exec, fs::perms::others_exec) << "runnable";
  EXPECT_EQ(read_file(schema), read_file(source_dir() / "docs/atif/atif-v1.8.schema.json"));
  auto write = [&](const std::string& name, int first_step) {
    auto path = work_->path() / name;
    std::ofstream(path) << R"({"schema_version":"ATIF-v1.8","agent":{"name":"metaharness","version":"1"},)"
                        << R"("steps":[{"step_id":)" << first_step << R"(,"source":"user","message":"go"}]})";
    return path.string();
  };
  auto valid = run_command({validator.string(), schema.string(), write("valid.json", 1)});
  EXPECT_EQ(valid.status, 0) << valid.out << valid.err;
  auto invalid = run_command({validator.string(), schema.string(), write("invalid.json", 2)});
  EXPECT_EQ(invalid.status, 1) << invalid.out << invalid.err;
  EXPECT_TRUE(has(invalid.out, "step_id")) << invalid.out;
}

}  // namespace
}  // namespace mh::test
