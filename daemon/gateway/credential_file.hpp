// The upstream's key as the gateway holds it: read from its file at start, and read again when the
// file changes (device, inode, mtime or size: a rename over it, an edit in place), checked on each
// request, so a rotated key is used from the next request on without a restart. A read that fails
// keeps the last key (an upstream answering 401 says more than a gateway that stopped).
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace mh::gateway {

class CredentialFile {
 public:
  // Bound on the file: a key is a line; anything longer is not a key file.
  static constexpr std::size_t kMaxBytes = 64u << 10;

  explicit CredentialFile(std::filesystem::path path) : path_(std::move(path)) {}

  // The first read; refused by name when the file cannot be read or holds nothing.
  std::optional<std::string> load();
  // Before a request: reads the file again if it changed. `log` hears a failed re-read.
  void refresh(const std::function<void(const std::string&)>& log);
  const std::string& key() const { return key_; }

 private:
  struct Identity {
    dev_t device = 0;
    ino_t inode = 0;
    struct timespec mtime {};
    off_t size = 0;
    bool operator==(const Identity& o) const {
      return device == o.device && inode == o.inode && mtime.tv_sec == o.mtime.tv_sec &&
             mtime.tv_nsec == o.mtime.tv_nsec && size == o.size;
    }
  };
  // The key in the file and the identity it was read at, or why not.
  struct Read {
    std::string key;
    Identity identity;
    std::string error;
  };
  Read read() const;

  std::filesystem::path path_;
  std::string key_;
  std::optional<Identity> identity_;
};

}  // namespace mh::gateway
