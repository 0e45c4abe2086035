#include "daemon/process/vendor_install_record.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/process/unique_fd.hpp"
#include "protocol/digest.hpp"
#include "protocol/json.hpp"

namespace mh::daemon {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

constexpr std::size_t kMaxRecordBytes = 1 << 20;  // a handful of entries; more is not ours

}  // namespace

boost::system::result<InstallRecord, std::string> InstallRecord::read(const fs::path& file, bool* absent) {
  using Result = boost::system::result<InstallRecord, std::string>;
  auto refuse = [&file](std::string why) {
    return Result(boost::system::in_place_error, "the install record " + file.string() + " " + why);
  };
  if (absent) *absent = false;
  // One descriptor, opened without blocking (a FIFO put in its place must not hold the daemon's
  // io thread: `get` reads this), checked to be a regular file, read to at most the bound.
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) {
    int e = errno;
    if (absent) *absent = e == ENOENT;
    return refuse(std::string("cannot be read: ") + std::strerror(e));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return refuse(std::string("cannot be read: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return refuse("is not a regular file");
  std::string text;
  char buffer[16 * 1024];
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return refuse(std::string("cannot be read: ") + std::strerror(errno));
    if (n == 0) break;
    if (text.size() + static_cast<std::size_t>(n) > kMaxRecordBytes) return refuse("is larger than 1 MiB");
    text.append(buffer, static_cast<std::size_t>(n));
  }
  auto parsed = protocol::parse_json(text);
  if (!parsed || !parsed->is_object()) return refuse("is not a JSON object");
  const json::object& o = parsed->get_object();
  if (protocol::string_at(o, "format") != std::string(kInstallRecordFormat))
    return refuse("is not a " + std::string(kInstallRecordFormat) + " document");
  InstallRecord record;
  record.recorded_at = protocol::string_at(o, "recorded_at").value_or("");
  const json::value* binaries = o.if_contains("binaries");
  if (!binaries || !binaries->is_array()) return refuse("has no \"binaries\" list");
  for (const auto& b : binaries->get_array()) {
    if (!b.is_object()) return refuse("holds a binary that is not an object");
    const json::object& e = b.get_object();
    protocol::InstalledBinary entry;
    for (auto [key, into] :
         {std::pair{"adapter", &entry.adapter}, std::pair{"package", &entry.package},
          std::pair{"version", &entry.version}, std::pair{"path", &entry.path}, std::pair{"sha256", &entry.sha256}}) {
      auto v = protocol::string_at(e, key);
      if (!v) return refuse("holds a binary without a string \"" + std::string(key) + "\"");
      *into = std::move(*v);
    }
    if (!protocol::is_digest(entry.sha256))
      return refuse("names a digest for " + entry.adapter + " that is not 64 lowercase hex characters");
    record.binaries.push_back(std::move(entry));
  }
  return record;
}

std::optional<std::string> InstallRecord::write(const fs::path& file) const {
  json::array list;
  for (const auto& b : binaries)
    list.push_back(json::object{{"adapter", b.adapter},
                                {"package", b.package},
                                {"version", b.version},
                                {"path", b.path},
                                {"sha256", b.sha256}});
  json::object o{{"format", kInstallRecordFormat}, {"recorded_at", recorded_at}, {"binaries", std::move(list)}};
  std::string text = protocol::pretty_json(o, false);
  fs::path temporary = file;
  temporary += ".tmp";
  auto failed = [&](std::string what) {
    int e = errno;
    ::unlink(temporary.c_str());
    return "cannot " + what + " " + temporary.string() + ": " + std::strerror(e);
  };
  UniqueFd fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) return failed("create");
  if (!write_all(fd.get(), text)) return failed("write");
  if (::fchmod(fd.get(), 0644) != 0) return failed("set the mode of");
  if (::fsync(fd.get()) != 0) return failed("sync");
  fd.reset();
  if (::rename(temporary.c_str(), file.c_str()) != 0) return failed("rename");
  return std::nullopt;
}

protocol::InstallRecordFact InstallRecord::fact_for(const fs::path& file, std::string_view adapter) {
  protocol::InstallRecordFact fact;
  fact.where = file.string();
  bool absent = false;
  auto record = read(file, &absent);
  if (!record) {
    fact.why_none =
        absent ? "no install record at " + file.string() + ": nobody recorded which binary `vendor install` installed"
               : record.error();
    return fact;
  }
  for (auto& b : record->binaries)
    if (b.adapter == adapter) {
      fact.entry = std::move(b);
      return fact;
    }
  fact.why_none = "the install record " + file.string() + " names no " + std::string(adapter) + " binary";
  return fact;
}

}  // namespace mh::daemon
