#include "daemon/gateway/credential_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mh::gateway {

namespace {

std::optional<struct stat> stat_of(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return st;
}

}  // namespace

CredentialFile::Read CredentialFile::read() const {
  Read out;
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    out.error = "cannot open " + path_.string() + ": " + std::strerror(errno);
    return out;
  }
  // The identity comes from the descriptor read, so a rename between stat and read cannot pair
  // one file's identity with another's key.
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    out.error = path_.string() + " is not a regular file";
    ::close(fd);
    return out;
  }
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out.error = "cannot read " + path_.string() + ": " + std::strerror(errno);
      ::close(fd);
      return out;
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > kMaxBytes) {
      out.error = path_.string() + " is larger than " + std::to_string(kMaxBytes) + " bytes: not a key file";
      ::close(fd);
      return out;
    }
  }
  ::close(fd);
  // A key file ends with a newline when written by an editor or `echo`; the newline is not the key.
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
    text.pop_back();
  if (text.empty()) {
    out.error = path_.string() + " is empty";
    return out;
  }
  if (text.find_first_of("\r\n") != std::string::npos) {
    out.error = path_.string() + " holds more than one line: not a key file";
    return out;
  }
  out.key = std::move(text);
  out.identity = Identity{st.st_dev, st.st_ino, st.st_mtim, st.st_size};
  return out;
}

std::optional<std::string> CredentialFile::load() {
  Read r = read();
  if (!r.error.empty()) return "the upstream's credential: " + r.error;
  key_ = std::move(r.key);
  identity_ = r.identity;
  return std::nullopt;
}

void CredentialFile::refresh(const std::function<void(const std::string&)>& log) {
  auto st = stat_of(path_);
  if (st && identity_ && *identity_ == Identity{st->st_dev, st->st_ino, st->st_mtim, st->st_size}) return;
  Read r = read();
  if (!r.error.empty()) {
    // Told once per change seen: the identity is remembered so the next request does not re-log.
    if (st) identity_ = Identity{st->st_dev, st->st_ino, st->st_mtim, st->st_size};
    if (log) log("gateway: keeping the last key: " + r.error);
    return;
  }
  key_ = std::move(r.key);
  identity_ = r.identity;
}

}  // namespace mh::gateway
