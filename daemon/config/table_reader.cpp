#include "daemon/config/table_reader.hpp"

#include <grp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>

namespace mh::daemon::config_tables {

namespace {

std::optional<std::uint32_t> gid_of(const std::string& name, std::string& problem) {
  long hint = ::sysconf(_SC_GETGR_R_SIZE_MAX);
  std::vector<char> buffer(hint > 0 ? static_cast<std::size_t>(hint) : 16384);
  group entry{};
  group* found = nullptr;
  int rc;
  while ((rc = ::getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found)) == ERANGE)
    buffer.resize(buffer.size() * 2);
  if (rc != 0) {
    problem = "cannot look up the group \"" + name + "\": " + std::strerror(rc);
    return std::nullopt;
  }
  if (!found) {
    problem = "no group named \"" + name + "\" on this host";
    return std::nullopt;
  }
  return static_cast<std::uint32_t>(entry.gr_gid);
}

}  // namespace

void TableReader::read_paths(const char* key, std::vector<std::filesystem::path>& target) {
  read_array(key, "absolute paths", [&](const toml::node& element) -> std::string {
    auto path = element.value_exact<std::string>();
    if (!path || path->empty() || path->front() != '/')
      return "must hold absolute paths only; found " + describe(element);
    target.push_back(std::filesystem::path(*path).lexically_normal());
    return "";
  });
}

void TableReader::read_ids(const char* key, std::set<std::uint32_t>& target) {
  read_array(key, "numeric ids", [&](const toml::node& element) -> std::string {
    auto id = element.value<std::int64_t>();
    if (!id || *id < 0 || *id > UINT32_MAX) return "must hold numeric uids/gids only; found " + describe(element);
    target.insert(static_cast<std::uint32_t>(*id));
    return "";
  });
}

void TableReader::read_group_names(const char* key, std::set<std::uint32_t>& gids) {
  read_array(key, "group names", [&](const toml::node& element) -> std::string {
    auto name = element.value_exact<std::string>();
    if (!name || name->empty())
      return "must hold group names only (numeric gids go in the _gids keys); found " + describe(element);
    std::string problem;
    if (auto gid = gid_of(*name, problem)) gids.insert(*gid);
    return problem;
  });
}

void TableReader::read_strings(const char* key, std::vector<std::string>& target,
                               const std::function<std::string(const std::string&)>& each) {
  read_array(key, "strings", [&](const toml::node& element) -> std::string {
    auto text = element.value_exact<std::string>();
    if (!text || text->empty()) return "must hold non-empty strings only; found " + describe(element);
    std::string problem = each(*text);
    if (problem.empty()) target.push_back(*text);
    return problem;
  });
}

void TableReader::finish() {
  if (!error_.empty()) return;
  for (const auto& [key, node] : table_) {
    std::string k(key.str());
    if (!seen_.count(k)) {
      error_ = "unknown key " + prefix_ + k + " (known keys of [" + prefix_.substr(0, prefix_.size() - 1) +
               "]: " + known() + ")";
      return;
    }
  }
}

std::string TableReader::known() const {
  std::string out;
  for (const auto& k : seen_)
    out += (out.empty() ? "" : ", ") + k;
  return out;
}

void TableReader::read_array(const char* key, const char* array_of, const ReadElement& each) {
  seen_.insert(key);
  const toml::node* node = table_.get(key);
  if (!node || !error_.empty()) return;
  const toml::array* array = node->as_array();
  if (!array) {
    fail(key, std::string("must be an array of ") + array_of + ", not " + describe(*node));
    return;
  }
  for (const auto& element : *array) {
    if (std::string problem = each(element); !problem.empty()) {
      fail(key, problem);
      return;
    }
  }
}

std::string TableReader::describe(const toml::node& node) {
  std::ostringstream ss;
  ss << node.type();
  return ss.str();
}

std::string positive_ms(const std::int64_t& v) {
  return v > 0 ? "" : "must be positive";
}

std::string describe_node(const toml::node& node) {
  std::ostringstream ss;
  ss << node.type();
  return ss.str();
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

}  // namespace mh::daemon::config_tables
