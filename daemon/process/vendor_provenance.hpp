// What a run's attestation says of the vendor binary it executes (issue 27 section 6,
// docs/hermetic.md): the file actually exec'd (the plan's program with every link resolved), its
// SHA-256 (OpenSSL EVP, read in bounded chunks) and the npm package that holds it (name and
// version from that package's own package.json, null when unknown: never a guess). Adapters do
// no I/O, so the daemon computes it once the plan exists (daemon/run/run.cpp).
//
// A vendor binary is hundreds of megabytes (Claude Code's 245 MB, Codex's 315 MB: 176 and 241 ms
// of CPU each, bench/RESULTS.md), so a digest is kept for the file it was computed from, known by its device, inode,
// size, modification and change times (nanoseconds): a write to the file changes its change time, which no caller can
// set back, and a replacement is another inode. Every run of the same unchanged binary then pays one stat.
#pragma once

#include <sys/stat.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/system/result.hpp>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "protocol/types.hpp"

namespace mh::daemon {

// The npm package a file lies in: the folder right under its innermost node_modules/ (or
// node_modules/@scope/), as npm lays packages out; name and version from that folder's
// package.json (at most 1 MiB; each null when absent, not a string, or the file unreadable).
// Both null for a file in no node_modules/ package.
struct NpmPackage {
  std::optional<std::string> name;
  std::optional<std::string> version;
};
NpmPackage npm_package_of(const std::filesystem::path& resolved_file);

class VendorProvenance {
 public:
  // Digests that keep() computes run on a thread of this object's own, started at the first one.
  VendorProvenance() = default;
  // ... or on `hashing` (tests hold it, to see what runs where).
  explicit VendorProvenance(boost::asio::any_io_executor hashing) : hashing_(std::move(hashing)) {}

  // The attestation of `program`: its resolved path, its digest and its package. A program that
  // cannot be resolved or read is refused by name: sha256 null, `refused` saying which file and
  // why (the path is then the one the plan named, or as far as it resolved). Reads the whole file
  // on the calling thread when no digest of it is kept: a daemon calls keep() first.
  protocol::VendorBinary of(const std::filesystem::path& program);

  // Makes of(program) cost one stat: when no digest of the file as it is now is kept, computes it
  // on the hashing thread (never the awaiting coroutine's: a daemon io thread serves other runs
  // and connections, and a first digest takes 0.4-0.6 s, bench/RESULTS.md) and resumes on the
  // coroutine's executor. The hashing thread digests one file at a time, so first runs of one
  // binary arriving together read it once. Nothing to do for nullopt (no binary known); a file
  // that cannot be read is left for of() to refuse by name. The awaiting coroutine keeps its
  // executor's context alive until it resumes (the daemon's submit holds the Server, which owns
  // the contexts).
  boost::asio::awaitable<void> keep(std::optional<std::filesystem::path> program);

  // The SHA-256 of one regular file, read through one descriptor in 1 MiB chunks; refused by
  // name when it cannot be opened or read, is not a regular file, or changed while it was read.
  static boost::system::result<std::string, std::string> file_sha256(const std::filesystem::path& file);

  // How many files this object has read to digest them (a digest it kept costs none).
  std::uint64_t files_digested() const;

 private:
  // What identifies the content a digest was computed from.
  struct FileIdentity {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    std::int64_t mtime_ns = 0;
    std::int64_t ctime_ns = 0;
    bool operator==(const FileIdentity&) const = default;
  };
  static FileIdentity identity_of(const struct stat& st);
  struct Kept {
    FileIdentity identity;
    std::string sha256;
  };

  // Whether a digest of `program`'s file as it is now is kept (resolve and stat, no read).
  bool is_kept(const std::filesystem::path& program) const;
  boost::asio::any_io_executor hashing_executor();

  mutable std::mutex mutex_;
  std::map<std::string, Kept> kept_;  // by resolved path; a handful of binaries per host
  std::uint64_t files_digested_ = 0;
  std::mutex hashing_mutex_;
  boost::asio::any_io_executor hashing_;  // hashing_mutex_
  // One thread, made at the first digest keep() asks for. Last member: destroyed (joined) first,
  // while what a digest in flight writes to is still there.
  std::optional<boost::asio::thread_pool> own_pool_;  // hashing_mutex_
};

// The daemon's one instance (every run of the process shares what it has digested).
VendorProvenance& shared_vendor_provenance();

}  // namespace mh::daemon
