// What `metaharness vendor install` installed, as it recorded it: <vendor dir>/installed.json,
// one entry per pinned vendor with the binary its adapter runs (resolved) and that binary's
// SHA-256. `metaharness audit` holds a run's attested binary to it (H9, docs/hermetic.md).
//
//   {"format": "metaharness.vendor-install/1", "recorded_at": "2026-12-06T18:00:00.000Z",
//    "binaries": [{"adapter": "claude", "package": "@anthropic-ai/claude-code",
//                  "version": "2.1.197", "path": "/…/claude", "sha256": "…"}, …]}
#pragma once

#include <boost/system/result.hpp>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/hermetic_floor.hpp"

namespace mh::daemon {

inline constexpr std::string_view kInstallRecordFormat = "metaharness.vendor-install/1";
inline constexpr std::string_view kInstallRecordFile = "installed.json";

struct InstallRecord {
  std::string recorded_at;  // RFC 3339, UTC
  std::vector<protocol::InstalledBinary> binaries;

  // The record's file in a vendor dir.
  static std::filesystem::path path_in(const std::filesystem::path& vendor_dir) {
    return vendor_dir / kInstallRecordFile;
  }
  // Read and checked (format, every field, every digest 64 lowercase hex); refused by name: the
  // file and what is wrong with it. A file that is not there is refused too (`absent` set).
  static boost::system::result<InstallRecord, std::string> read(const std::filesystem::path& file,
                                                                bool* absent = nullptr);
  // Written whole to a temporary file beside it, then renamed over it (mode 0644: the daemon's
  // user reads it); the reason when it could not be.
  std::optional<std::string> write(const std::filesystem::path& file) const;

  // What the floor's H9 reads for `adapter`: the entry, or why there is none.
  static protocol::InstallRecordFact fact_for(const std::filesystem::path& file, std::string_view adapter);
};

}  // namespace mh::daemon
