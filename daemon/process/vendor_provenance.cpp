#include "daemon/process/vendor_provenance.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <cstring>
#include <vector>

#include "daemon/process/unique_fd.hpp"
#include "protocol/digest.hpp"
#include "protocol/json.hpp"

namespace mh::daemon {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kChunk = 1 << 20;             // one read
constexpr std::size_t kMaxManifestBytes = 1 << 20;  // a package.json larger than this says nothing
constexpr std::size_t kMaxKept = 64;                // digests kept; a host has a handful of binaries

std::string errno_text(int e) {
  return std::strerror(e);
}

std::int64_t ns_of(const struct timespec& t) {
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// One small file, whole, or nullopt when it cannot be read or exceeds `limit`.
std::optional<std::string> read_small(const fs::path& file, std::size_t limit) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return std::nullopt;
  std::string text;
  char buffer[16 * 1024];
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return text;
    if (text.size() + static_cast<std::size_t>(n) > limit) return std::nullopt;
    text.append(buffer, static_cast<std::size_t>(n));
  }
}

struct Digested {
  struct stat st {};
  std::string sha256;
};

boost::system::result<Digested, std::string> digest_file(const fs::path& file) {
  using Result = boost::system::result<Digested, std::string>;
  auto refuse = [&file](std::string why) {
    return Result(boost::system::in_place_error, "cannot digest the vendor binary " + file.string() + ": " + why);
  };
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return refuse(errno_text(errno));
  Digested out;
  if (::fstat(fd.get(), &out.st) != 0) return refuse(errno_text(errno));
  if (!S_ISREG(out.st.st_mode)) return refuse("not a regular file");
  protocol::Sha256 sha;
  std::vector<char> buffer(kChunk);
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return refuse(errno_text(errno));
    if (n == 0) break;
    sha.update(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
  }
  struct stat after {};
  if (::fstat(fd.get(), &after) != 0) return refuse(errno_text(errno));
  // A file written while it was read has no one digest.
  if (after.st_size != out.st.st_size || ns_of(after.st_mtim) != ns_of(out.st.st_mtim) ||
      ns_of(after.st_ctim) != ns_of(out.st.st_ctim))
    return refuse("it changed while it was read");
  out.sha256 = sha.finish_hex();
  return out;
}

}  // namespace

NpmPackage npm_package_of(const fs::path& resolved_file) {
  // The innermost node_modules/ the file lies under, then one folder (or @scope/ and one).
  std::vector<fs::path> parts(resolved_file.begin(), resolved_file.end());
  std::size_t at = parts.size();
  for (std::size_t i = parts.size(); i-- > 0;)
    if (parts[i] == "node_modules") {
      at = i;
      break;
    }
  std::size_t name_at = at + 1;
  if (name_at < parts.size() && parts[name_at].string().starts_with("@")) ++name_at;
  // The package folder must hold the file, not be it.
  if (at == parts.size() || name_at + 1 >= parts.size()) return {};
  fs::path root;
  for (std::size_t i = 0; i <= name_at; ++i)
    root /= parts[i];
  auto text = read_small(root / "package.json", kMaxManifestBytes);
  if (!text) return {};
  auto parsed = protocol::parse_json(*text);
  if (!parsed || !parsed->is_object()) return {};
  NpmPackage p;
  p.name = protocol::string_at(parsed->get_object(), "name");
  p.version = protocol::string_at(parsed->get_object(), "version");
  return p;
}

VendorProvenance::FileIdentity VendorProvenance::identity_of(const struct stat& st) {
  return {st.st_dev, st.st_ino, st.st_size, ns_of(st.st_mtim), ns_of(st.st_ctim)};
}

boost::system::result<std::string, std::string> VendorProvenance::file_sha256(const fs::path& file) {
  using Result = boost::system::result<std::string, std::string>;
  auto digested = digest_file(file);
  if (!digested) return Result(boost::system::in_place_error, digested.error());
  return Result(boost::system::in_place_value, std::move(digested->sha256));
}

protocol::VendorBinary VendorProvenance::of(const fs::path& program) {
  protocol::VendorBinary out;
  std::error_code ec;
  fs::path resolved = fs::canonical(program, ec);
  if (ec) {
    out.path = program.string();
    out.refused = "cannot resolve the vendor binary " + program.string() + ": " + ec.message();
    return out;
  }
  out.path = resolved.string();
  NpmPackage package = npm_package_of(resolved);
  out.package = std::move(package.name);
  out.version = std::move(package.version);

  struct stat st {};
  if (::stat(resolved.c_str(), &st) == 0) {
    std::lock_guard lock(mutex_);
    if (auto it = kept_.find(out.path); it != kept_.end() && it->second.identity == identity_of(st)) {
      out.sha256 = it->second.sha256;
      return out;
    }
  }
  // Read outside the lock: another run's launch does not wait for this one's digest.
  auto digested = digest_file(resolved);
  std::lock_guard lock(mutex_);
  ++files_digested_;
  if (!digested) {
    out.refused = digested.error();
    return out;
  }
  if (kept_.size() >= kMaxKept) kept_.clear();
  kept_[out.path] = Kept{identity_of(digested->st), digested->sha256};
  out.sha256 = std::move(digested->sha256);
  return out;
}

bool VendorProvenance::is_kept(const fs::path& program) const {
  std::error_code ec;
  fs::path resolved = fs::canonical(program, ec);
  struct stat st {};
  if (ec || ::stat(resolved.c_str(), &st) != 0) return false;
  std::lock_guard lock(mutex_);
  auto it = kept_.find(resolved.string());
  return it != kept_.end() && it->second.identity == identity_of(st);
}

boost::asio::any_io_executor VendorProvenance::hashing_executor() {
  std::lock_guard lock(hashing_mutex_);
  if (!hashing_) hashing_ = own_pool_.emplace(1).get_executor();
  return hashing_;
}

boost::asio::awaitable<void> VendorProvenance::keep(std::optional<fs::path> program) {
  if (!program || is_kept(*program)) co_return;
  // of() on the hashing thread keeps what it computes (or leaves a refusal for the run's own
  // of() to state); the caller resumes on its own executor when it is done.
  auto digest = [this, file = std::move(*program)]() -> boost::asio::awaitable<void> {
    (void)of(file);
    co_return;
  };
  auto hashing = hashing_executor();
  auto digested = boost::asio::co_spawn(hashing, std::move(digest), boost::asio::use_awaitable);
  co_await std::move(digested);
}

std::uint64_t VendorProvenance::files_digested() const {
  std::lock_guard lock(mutex_);
  return files_digested_;
}

VendorProvenance& shared_vendor_provenance() {
  static VendorProvenance instance;
  return instance;
}

}  // namespace mh::daemon
