// The [vendor] keys of the daemon's config: a relative path is the config file's directory's
// (issue 24: it was kept relative, so every run failed where the path named nothing), an absolute
// one is kept, and an empty folder is refused by name.
#include <gtest/gtest.h>

#include <fstream>

#include "daemon/config/config.hpp"
#include "tests/support/config_text.hpp"

namespace mh::test {
namespace {

TEST(VendorConfig, ARelativePathIsTheConfigFilesDirectorysNotTheDaemonsWorkingDirectorys) {
  TempDir dir("vendor-config");
  std::filesystem::create_directories(dir.path() / "etc");
  auto file = dir.path() / "etc" / "c.toml";
  std::ofstream(file) << "[vendor]\ndir = \"../vendor\"\nclaude = \"bin/claude\"\ncodex = \"./codex\"\n"
                         "opencode = \"/opt/x/opencode\"\ncodex_hook = \"hook\"\n";
  auto c = daemon::load_config(file);
  ASSERT_TRUE(c) << c.error();
  const auto etc = std::filesystem::absolute(dir.path() / "etc");
  EXPECT_EQ(c->vendor.vendor_dir, (etc / "../vendor").lexically_normal());
  EXPECT_EQ(c->vendor.binaries.at("claude"), etc / "bin/claude");
  EXPECT_EQ(c->vendor.binaries.at("codex"), etc / "codex");
  EXPECT_EQ(c->vendor.binaries.at("opencode"), "/opt/x/opencode") << "an absolute path is kept";
  EXPECT_EQ(c->vendor.binaries.at("codex-hook"), etc / "hook");
  for (const auto& [key, path] : c->vendor.binaries)
    EXPECT_TRUE(path.is_absolute()) << key;
}

TEST(VendorConfig, AnEmptyFolderIsRefusedByName) {
  EXPECT_TRUE(refused_naming("[vendor]\ndir = \"\"\n", {"vendor.dir", "must not be empty"}));
}

}  // namespace
}  // namespace mh::test
