// A directory named by a peer, resolved and judged as that peer: a root daemon binds a run's cwd
// into the run, and a bind passes by every directory above it, so the daemon must not bind one the
// peer could not reach itself (a repository under another user's 0700 home, or a process's cwd
// named through /proc/PID/cwd, which only root may read). A forked child takes the peer's uid, gid
// and groups, resolves the path (links and `..`) and asks the kernel whether it may enter, read and
// write the directory it reached: the kernel's own judgement (modes, ACLs, /proc's ptrace checks),
// not a copy of it.
#pragma once

#include <sys/types.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/result.hpp>
#include <chrono>
#include <set>
#include <string>

#include "daemon/process/directory_identity.hpp"

namespace mh::daemon {

// A directory as the peer reached it: its real path, and which directory that was (the bind must
// find the same one: SandboxSpec::cwd_identity).
struct JudgedDirectory {
  std::string real_path;
  DirectoryIdentity identity;
};

// The directory `given` names when the uid (with gid and groups) can resolve it and enter, read
// and write it; else why not, in words that name nothing the peer could not see
// (the path as given, never what root resolved it to). Needs the privilege to change uid (a root
// daemon); forks, and blocks the calling thread for at most `bound` (the child runs as the peer,
// who may stop it or name a path that never answers: past the bound it is killed and the answer is
// no). Call it off the daemon's io threads (cwd_check_executor()).
boost::system::result<JudgedDirectory, std::string> directory_as_uid(
    const std::string& given, uid_t uid, gid_t gid, const std::set<std::uint32_t>& groups,
    std::chrono::milliseconds bound = std::chrono::milliseconds(5000));

// Where directory_as_uid is called from a daemon: two threads of their own, never an io thread (a
// check may take its whole bound, and an io thread serves other runs and connections).
boost::asio::any_io_executor cwd_check_executor();

}  // namespace mh::daemon
