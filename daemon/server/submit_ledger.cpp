#include "daemon/server/submit_ledger.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "protocol/json.hpp"

namespace mh::daemon {

namespace json = boost::json;

namespace {

constexpr std::size_t kMaxRequestIdChars = 128;
// As every file of the state directory (docs/containment.md): the daemon's, readable by its group.
constexpr mode_t kLedgerMode = 0640;

std::int64_t unix_ms(SubmitLedger::SystemClock::time_point at) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(at.time_since_epoch()).count();
}

std::string ledger_line(std::uint32_t uid, const std::string& request_id, const std::string& digest,
                        const std::string& run_id, SubmitLedger::SystemClock::time_point at) {
  json::object line;
  line["uid"] = uid;
  line["request_id"] = request_id;
  line["spec_sha256"] = digest;
  line["run_id"] = run_id;
  line["at_ms"] = unix_ms(at);
  return json::serialize(line) + "\n";
}

std::string errno_text(const std::string& what, const std::filesystem::path& file) {
  return what + " " + file.string() + ": " + std::strerror(errno);
}

}  // namespace

std::string request_id_problem(std::string_view id) {
  if (id.empty() || id.size() > kMaxRequestIdChars)
    return "request_id must be 1-" + std::to_string(kMaxRequestIdChars) + " characters (it has " +
           std::to_string(id.size()) + ")";
  for (char c : id) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == ':' || c == '-';
    if (!ok) return "request_id may hold only A-Z a-z 0-9 . _ : - (docs/socket-api.md)";
  }
  return "";
}

std::optional<std::string> SubmitLedger::open(SubmitLedger& ledger, std::filesystem::path file,
                                              std::chrono::seconds retention, SystemClock::time_point now) {
  std::lock_guard lock(ledger.mutex_);
  ledger.file_ = std::move(file);
  ledger.retention_ = retention;
  std::size_t dropped = 0, lines = 0;
  if (std::ifstream in(ledger.file_); in) {
    std::string text;
    while (std::getline(in, text)) {
      ++lines;
      boost::system::error_code ec;
      json::value v = json::parse(text, ec);
      const json::object* o = ec ? nullptr : v.if_object();
      const json::value* uid = o ? o->if_contains("uid") : nullptr;
      const json::value* rid = o ? o->if_contains("request_id") : nullptr;
      const json::value* digest = o ? o->if_contains("spec_sha256") : nullptr;
      const json::value* run = o ? o->if_contains("run_id") : nullptr;
      const json::value* at = o ? o->if_contains("at_ms") : nullptr;
      // Boost.JSON reads a small non-negative number as int64.
      bool uid_fits = uid && uid->is_int64() && uid->get_int64() >= 0 && uid->get_int64() <= UINT32_MAX;
      bool whole = uid_fits && rid && rid->is_string() && digest && digest->is_string() && run && run->is_string() &&
                   !run->get_string().empty() && at && at->is_int64();
      if (!whole) {  // a line torn by a crash mid-write, or not ours
        ++dropped;
        continue;
      }
      auto when = SystemClock::time_point(std::chrono::milliseconds(at->get_int64()));
      Key key{static_cast<std::uint32_t>(uid->get_int64()), std::string(rid->get_string())};
      if (when + retention < now || ledger.entries_.count(key)) {
        ++dropped;
        continue;
      }
      Entry entry{std::string(digest->get_string()), std::string(run->get_string()), when, {}};
      ledger.entries_.emplace(key, std::move(entry));
      ledger.by_age_.emplace_back(when, std::move(key));
    }
  }
  ledger.lines_in_file_ = lines;
  std::optional<std::string> problem;
  if (dropped > 0 || lines == 0) problem = ledger.rewrite();  // also makes the file when there is none
  if (!ledger.fd_) {
    // Not rewritten (a full disk, say): appended to as it is. What it holds is kept in memory;
    // if it cannot be opened either, a submit with a request_id is refused until it can.
    if (auto unopened = ledger.open_for_append()) problem = problem ? *problem + "; " + *unopened : *unopened;
  }
  return problem;
}

std::optional<std::string> SubmitLedger::open_for_append() {
  fd_ = UniqueFd(::open(file_.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, kLedgerMode));
  if (!fd_) return errno_text("cannot open", file_);
  ::fchmod(fd_.get(), kLedgerMode);
  // A last line torn by a crash ends here, so the next line starts on a line of its own.
  char last = '\n';
  off_t size = ::lseek(fd_.get(), 0, SEEK_END);
  if (size > 0 && ::pread(fd_.get(), &last, 1, size - 1) == 1 && last != '\n' && !write_all(fd_.get(), "\n")) {
    fd_.reset();
    return errno_text("cannot write", file_);
  }
  return std::nullopt;
}

SubmitLedger::Claimed SubmitLedger::claim(std::uint32_t uid, const std::string& request_id,
                                          const std::string& spec_digest, SystemClock::time_point now) {
  std::lock_guard lock(mutex_);
  expire(now);
  auto [it, made] = entries_.try_emplace(Key{uid, request_id});
  if (made) {
    it->second.spec_digest = spec_digest;
    it->second.at = now;
    return {Claim::fresh, ""};
  }
  const Entry& entry = it->second;
  if (entry.run_id.empty()) return {Claim::in_flight, ""};
  return {entry.spec_digest == spec_digest ? Claim::duplicate : Claim::conflict, entry.run_id};
}

std::optional<std::string> SubmitLedger::commit(std::uint32_t uid, const std::string& request_id,
                                                const std::string& run_id, SystemClock::time_point now) {
  std::vector<std::function<void()>> waiters;
  std::optional<std::string> problem;
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(Key{uid, request_id});
    if (it == entries_.end() || !it->second.run_id.empty()) return "request_id " + request_id + " is not claimed";
    problem = append(ledger_line(uid, request_id, it->second.spec_digest, run_id, now));
    waiters = std::move(it->second.waiters);
    if (problem) {
      entries_.erase(it);
    } else {
      it->second.run_id = run_id;
      it->second.at = now;
      by_age_.emplace_back(now, it->first);
    }
  }
  for (auto& then : waiters)
    then();
  return problem;
}

void SubmitLedger::release(std::uint32_t uid, const std::string& request_id) {
  std::vector<std::function<void()>> waiters;
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(Key{uid, request_id});
    if (it == entries_.end() || !it->second.run_id.empty()) return;
    waiters = std::move(it->second.waiters);
    entries_.erase(it);
  }
  for (auto& then : waiters)
    then();
}

void SubmitLedger::when_settled(std::uint32_t uid, const std::string& request_id, std::function<void()> then) {
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(Key{uid, request_id});
    if (it != entries_.end() && it->second.run_id.empty()) {
      it->second.waiters.push_back(std::move(then));
      return;
    }
  }
  then();
}

std::size_t SubmitLedger::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

void SubmitLedger::expire(SystemClock::time_point now) {
  bool dropped = false;
  while (!by_age_.empty() && by_age_.front().first + retention_ < now) {
    auto it = entries_.find(by_age_.front().second);
    // The entry may be a newer one of the same key (claimed again after an expiry): keep that.
    if (it != entries_.end() && !it->second.run_id.empty() && it->second.at == by_age_.front().first) {
      entries_.erase(it);
      dropped = true;
    }
    by_age_.pop_front();
  }
  // The file keeps the expired lines until they outnumber the live ones (one rewrite per
  // halving, so its size stays within twice what the retention holds).
  if (dropped && fd_ && lines_in_file_ > 2 * by_age_.size() + 64) rewrite();
}

std::optional<std::string> SubmitLedger::rewrite() {
  if (file_.empty()) return std::nullopt;
  std::filesystem::path next = file_;
  next += ".new";
  UniqueFd out(::open(next.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kLedgerMode));
  if (!out) return errno_text("cannot write", next);
  ::fchmod(out.get(), kLedgerMode);  // exactly, whatever the daemon's umask
  std::string text;
  std::size_t lines = 0;
  for (const auto& [at, key] : by_age_) {
    auto it = entries_.find(key);
    if (it == entries_.end() || it->second.run_id.empty() || it->second.at != at) continue;
    text += ledger_line(key.first, key.second, it->second.spec_digest, it->second.run_id, at);
    ++lines;
  }
  if (!write_all(out.get(), text) || ::fdatasync(out.get()) != 0) return errno_text("cannot write", next);
  if (::rename(next.c_str(), file_.c_str()) != 0) return errno_text("cannot replace", file_);
  lines_in_file_ = lines;
  return open_for_append();
}

std::optional<std::string> SubmitLedger::append(const std::string& line) {
  if (file_.empty()) return std::nullopt;  // in memory only
  if (!fd_) return "the submit ledger " + file_.string() + " is not open";
  // One write of a whole line (O_APPEND): a crash tears at most this line, which open() drops. A
  // failed write (a full disk) is cut back off, so the next line does not run on from its half.
  off_t before = ::lseek(fd_.get(), 0, SEEK_END);
  if (!write_all(fd_.get(), line) || ::fdatasync(fd_.get()) != 0) {
    std::string problem = errno_text("cannot write", file_);
    if (before >= 0) (void)!::ftruncate(fd_.get(), before);
    return problem;
  }
  ++lines_in_file_;
  return std::nullopt;
}

}  // namespace mh::daemon
