// [access]: root is admin by default, groups granted by name (resolved at start, an unknown name
// refused), supplementary groups count, and the client finds the packaged daemon's socket.
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <fstream>

#include "tests/support/config_text.hpp"

namespace mh::test {
namespace {

std::string group_name(gid_t gid) {
  const group* g = ::getgrgid(gid);
  return g ? g->gr_name : "";
}

TEST(Access, RootIsAdminByDefaultWhateverUserTheDaemonRunsAsAndAKeyTurnsItOff) {
  daemon::DaemonConfig c;
  c.owner_is_admin = false;  // as when the daemon runs as its own user and root connects
  EXPECT_EQ(c.role_of(0, std::set<std::uint32_t>{0}), daemon::Role::admin);
  c.root_is_admin = false;
  EXPECT_EQ(c.role_of(0, std::set<std::uint32_t>{0}), daemon::Role::none);

  auto defaults = daemon::load_config(std::nullopt);
  ASSERT_TRUE(defaults);
  EXPECT_TRUE(defaults->root_is_admin);
  auto off = load_config_text("[access]\nroot_is_admin = false\n");
  ASSERT_TRUE(off) << off.error();
  EXPECT_FALSE(off->root_is_admin);
  EXPECT_TRUE(refused_naming("[access]\nroot_is_admin = \"yes\"\n", {"access.root_is_admin: must be true or false"}));
}

TEST(Access, AnyGroupOfThePeerGrantsItsRoleAndTheHighestRoleWins) {
  daemon::DaemonConfig c;
  c.owner_is_admin = false;
  c.root_is_admin = false;
  c.observe.gids = {100};
  c.control.gids = {2000};
  c.admin.uids = {4242};
  EXPECT_EQ(c.role_of(1005, std::set<std::uint32_t>{1005}), daemon::Role::none);
  EXPECT_EQ(c.role_of(1005, std::set<std::uint32_t>{1005, 100}), daemon::Role::observe);
  // A supplementary group, not the gid of the peer's credentials.
  EXPECT_EQ(c.role_of(1005, std::set<std::uint32_t>{1005, 100, 2000}), daemon::Role::control);
  EXPECT_EQ(c.role_of(4242, std::set<std::uint32_t>{100}), daemon::Role::admin);
}

TEST(Access, GroupsByNameAreResolvedWhenTheConfigLoads) {
  std::string name = group_name(::getegid());
  ASSERT_FALSE(name.empty()) << "the test's own gid has no group name";
  auto c = load_config_text("[access]\ncontrol_groups = [\"" + name + "\"]\nobserve_groups = []\n");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->control.gids, std::set<std::uint32_t>{static_cast<std::uint32_t>(::getegid())});
  EXPECT_TRUE(c->observe.gids.empty());
  EXPECT_TRUE(c->admin.gids.empty());
  // Names and numeric gids add up.
  auto both = load_config_text("[access]\nadmin_groups = [\"" + name + "\"]\nadmin_gids = [4711]\n");
  ASSERT_TRUE(both) << both.error();
  EXPECT_EQ(both->admin.gids, (std::set<std::uint32_t>{static_cast<std::uint32_t>(::getegid()), 4711}));
}

TEST(Access, AGroupNameTheHostDoesNotKnowIsRefusedByName) {
  const std::string unknown = "mh-no-such-group-" + std::to_string(::getpid());
  ASSERT_EQ(::getgrnam(unknown.c_str()), nullptr);
  EXPECT_TRUE(refused_naming("[access]\ncontrol_groups = [\"" + unknown + "\"]\n",
                             {"access.control_groups: no group named \"" + unknown + "\" on this host"}));
  EXPECT_TRUE(
      refused_naming("[access]\nobserve_groups = [1000]\n", {"access.observe_groups: must hold group names only"}));
  EXPECT_TRUE(
      refused_naming("[access]\nadmin_groups = \"wheel\"\n", {"access.admin_groups: must be an array of group names"}));
}

TEST(Access, TheDaemonRefusesAnUnknownGroupAtStartWithExitTwo) {
  TempDir dir("unknowngroup");
  const std::string unknown = "mh-no-such-group-" + std::to_string(::getpid());
  std::ofstream(dir.path() / "c.toml") << "[access]\ncontrol_groups = [\"" << unknown << "\"]\n";
  CliProcess p({metaharness_binary().string(), "daemon", "--config", (dir.path() / "c.toml").string(), "--socket",
                (dir.path() / "s").string(), "--state-dir", (dir.path() / "st").string()});
  EXPECT_EQ(p.finish(30s), 2);
  EXPECT_NE(p.stderr_text().find("no group named \"" + unknown + "\""), std::string::npos) << p.stderr_text();
}

// The real group database: root's groups hold gid 0, and a host group with a member gives that
// member's uid the group. (The systemd test proves it end to end with a member it creates.)
TEST(Access, GroupsOfReadsTheHostGroupDatabase) {
  EXPECT_TRUE(daemon::groups_of(0, 0).count(0));
  EXPECT_EQ(daemon::groups_of(0x7ffffff0u, 12345), std::set<std::uint32_t>{12345}) << "a uid with no user";
  ::setgrent();
  std::optional<std::pair<passwd, gid_t>> member;
  while (const group* g = ::getgrent()) {
    for (char** m = g->gr_mem; m && *m && !member; ++m)
      if (const passwd* pw = ::getpwnam(*m); pw && pw->pw_gid != g->gr_gid) member.emplace(*pw, g->gr_gid);
    if (member) break;
  }
  ::endgrent();
  if (!member) GTEST_SKIP() << "no group on this host has a member to look up";
  EXPECT_TRUE(daemon::groups_of(member->first.pw_uid, member->first.pw_gid).count(member->second));
}

TEST(Access, TheClientFindsThePackagedDaemonsSocketWhenItsOwnDefaultHasNone) {
  TempDir dir("clientsocket");
  auto own = dir.path() / "own" / "metaharness.sock";
  auto system = dir.path() / "run-metaharness" / "metaharness.sock";
  EXPECT_EQ(daemon::client_socket_choice(own, system), own) << "no system daemon either: the own default";
  std::filesystem::create_directories(system.parent_path());
  EXPECT_EQ(daemon::client_socket_choice(own, system), system);
  std::filesystem::create_directories(own.parent_path());
  std::ofstream(own.string()) << "";
  EXPECT_EQ(daemon::client_socket_choice(own, system), own) << "a daemon of this environment comes first";
}

// The config the package installs as /etc/metaharness/metaharness.toml, with the group it grants
// swapped for one this host has (the package's sysusers file creates `metaharness`).
TEST(Access, ThePackagedConfigGrantsControlToItsGroupAndNamesThePackagedPaths) {
  std::string text = read_file(source_dir() / "packaging/metaharness.toml");
  const std::string line = "control_groups = [\"metaharness\"]";
  auto at = text.find(line);
  ASSERT_NE(at, std::string::npos) << "the packaged config grants control to the group metaharness";
  std::string name = group_name(::getegid());
  text.replace(at, line.size(), "control_groups = [\"" + name + "\"]");
  auto c = load_config_text(text);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->vendor.vendor_dir, "/var/lib/metaharness/vendor");
  // No vendor's helper is named: the daemon finds each in the package's helper folder
  // (RegistryTest.AHelperProgramNotBesideTheBinaryIsThePackagedOne), so a new vendor's hook
  // program needs no line in the packaged config.
  EXPECT_EQ(text.find("mh-codex-hook"), std::string::npos);
  EXPECT_EQ(c->control.gids, std::set<std::uint32_t>{static_cast<std::uint32_t>(::getegid())});
  EXPECT_TRUE(c->root_is_admin);
}

}  // namespace
}  // namespace mh::test
