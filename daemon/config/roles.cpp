// Roles: what a peer may do, from the [access] grants and the groups its uid belongs to.
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <optional>
#include <string_view>
#include <vector>

#include "daemon/config/config.hpp"
#include "protocol/types.hpp"

template <>
struct mh::protocol::EnumNames<mh::daemon::Role> {  // Role's values are 0..3, in this order
  static constexpr std::array names = {std::string_view("none"), std::string_view("observe"),
                                       std::string_view("control"), std::string_view("admin")};
};

namespace mh::daemon {

std::string_view to_string(Role role) {
  return protocol::to_string(role);
}

namespace {

// The name and primary group of uid's user in the host's user database; nullopt without one.
struct UserEntry {
  std::string name;
  std::uint32_t gid = 0;
};
std::optional<UserEntry> user_entry(std::uint32_t uid) {
  long hint = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(hint > 0 ? static_cast<std::size_t>(hint) : 16384);
  passwd entry{};
  passwd* found = nullptr;
  int rc;
  while ((rc = ::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found)) == ERANGE)
    buffer.resize(buffer.size() * 2);
  if (rc != 0 || !found) return std::nullopt;
  return UserEntry{entry.pw_name, entry.pw_gid};
}

}  // namespace

std::optional<std::uint32_t> primary_gid_of(std::uint32_t uid) {
  auto user = user_entry(uid);
  if (!user) return std::nullopt;
  return user->gid;
}

std::set<std::uint32_t> groups_of_user(std::uint32_t uid) {
  auto user = user_entry(uid);
  return user ? groups_of(uid, user->gid) : std::set<std::uint32_t>{};
}

std::set<std::uint32_t> groups_of(std::uint32_t uid, std::uint32_t gid) {
  std::set<std::uint32_t> out{gid};
  auto user = user_entry(uid);
  if (!user) return out;
  std::vector<gid_t> list(64);
  for (;;) {
    int n = static_cast<int>(list.size());
    if (::getgrouplist(user->name.c_str(), gid, list.data(), &n) >= 0) {
      out.insert(list.begin(), list.begin() + n);
      return out;
    }
    // n now holds how many there are.
    list.resize(std::max<std::size_t>(static_cast<std::size_t>(n), list.size() * 2));
  }
}

Role DaemonConfig::role_of(std::uint32_t uid, std::uint32_t gid) const {
  // The group database is asked only when a group grant could change the answer.
  bool any_group_grant = !observe.gids.empty() || !control.gids.empty() || !admin.gids.empty();
  return role_of(uid, any_group_grant ? groups_of(uid, gid) : std::set<std::uint32_t>{gid});
}

Role DaemonConfig::role_of(std::uint32_t uid, const std::set<std::uint32_t>& groups) const {
  auto granted = [&](const Grants& g) {
    if (g.uids.count(uid)) return true;
    for (auto gid : groups)
      if (g.gids.count(gid)) return true;
    return false;
  };
  // Root administers a system daemon whoever it runs as, as an operator expects; the daemon's own
  // user administers it too. Either can be switched off.
  if ((root_is_admin && uid == 0) || (owner_is_admin && uid == ::geteuid()) || granted(admin)) return Role::admin;
  if (granted(control)) return Role::control;
  if (granted(observe)) return Role::observe;
  return Role::none;
}

}  // namespace mh::daemon
