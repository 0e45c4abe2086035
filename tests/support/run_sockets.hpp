// What a run's processes are connected to, read from /proc: the remote side of every TCP and UDP
// socket (IPv4 and IPv6) a process holds open, and whether such an address is loopback (or no
// peer at all). The vendor suites' "no socket of the run reaches beyond loopback" tests (opencode,
// Gemini CLI, Qwen Code) read them while a run waits on a decision.
#pragma once

#include <filesystem>
#include <set>
#include <sstream>
#include <string>

#include "tests/support/cli_process.hpp"

namespace mh::test {

// The remote addresses of every socket `pid` holds open, hex as /proc/net shows them.
inline std::set<std::string> remote_addresses(int pid) {
  namespace fs = std::filesystem;
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& fd : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    auto target = fs::read_symlink(fd.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::set<std::string> remotes;
  for (const char* table : {"tcp", "tcp6", "udp", "udp6"})
    for (const auto& line : read_lines("/proc/" + std::to_string(pid) + "/net/" + table)) {
      std::istringstream fields(line);
      std::string sl, local, remote, st, queues, tr, retr, uid, timeout, inode;
      if (!(fields >> sl >> local >> remote >> st >> queues >> tr >> retr >> uid >> timeout >> inode)) continue;
      if (inodes.count(inode)) remotes.insert(remote);
    }
  return remotes;
}

// 127.0.0.0/8, ::1, ::ffff:127.x.x.x, or the all-zero address of a socket with no peer.
inline bool is_loopback_or_unconnected(const std::string& hex) {
  std::string address = hex.substr(0, hex.find(':'));
  if (address.size() == 8) return address == "00000000" || address.substr(6, 2) == "7F";  // 127.x.x.x, little-endian
  return address == std::string(32, '0') || address == "00000000000000000000000001000000" ||
         (address.substr(0, 24) == "0000000000000000FFFF0000" && address.substr(30, 2) == "7F");
}

}  // namespace mh::test
