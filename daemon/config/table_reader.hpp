// What every table's reader shares (daemon/config only; config.hpp is the public side): TableReader,
// which applies one TOML table's keys through typed setters and refuses any other key, and the
// small rules the readers have in common.
#pragma once

#include <toml++/toml.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace mh::daemon::config_tables {

// Applies one TOML table's keys through typed setters; anything else is an unknown key. The first
// refusal goes to `error`; once it holds one, nothing more is read.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string prefix, std::string& error)
      : table_(table), prefix_(std::move(prefix)), error_(error) {}

  template <class T>
  void read(const char* key, T& target, std::function<std::string(const T&)> check = {}) {
    seen_.insert(key);
    const toml::node* node = table_.get(key);
    if (!node || !error_.empty()) return;
    std::optional<T> value;
    if constexpr (std::is_same_v<T, bool>)
      value = node->value<bool>();
    else if constexpr (std::is_same_v<T, std::string>)
      value = node->value<std::string>();
    else if constexpr (std::is_integral_v<T>) {
      auto v = node->value<std::int64_t>();
      if (v && *v < 0) {
        fail(key, "must not be negative");
        return;
      }
      if (v) value = static_cast<T>(*v);
    }
    if (!value) {
      fail(key, std::string("must be ") + type_name<T>() + ", not " + describe(*node));
      return;
    }
    if (check) {
      std::string problem = check(*value);
      if (!problem.empty()) {
        fail(key, problem);
        return;
      }
    }
    target = *value;
  }

  // A key read elsewhere (a nested table): known, so finish() does not refuse it.
  void known_elsewhere(const char* key) { seen_.insert(key); }

  void read_ms(const char* key, std::chrono::milliseconds& target) {
    std::int64_t ms = target.count();
    read<std::int64_t>(key, ms);
    target = std::chrono::milliseconds(ms);
  }

  // Absolute paths, normalised.
  void read_paths(const char* key, std::vector<std::filesystem::path>& target);
  void read_ids(const char* key, std::set<std::uint32_t>& target);
  // Group names, resolved now (getgrnam): an unknown name is refused here, at start, by name.
  void read_group_names(const char* key, std::set<std::uint32_t>& gids);
  // An array of non-empty strings (`each` may refuse one, saying why).
  void read_strings(const char* key, std::vector<std::string>& target,
                    const std::function<std::string(const std::string&)>& each);

  void finish();

 private:
  void fail(const char* key, const std::string& why) {
    if (error_.empty()) error_ = prefix_ + key + ": " + why;
  }
  std::string known() const;
  template <class T>
  static const char* type_name() {
    if constexpr (std::is_same_v<T, bool>)
      return "true or false";
    else if constexpr (std::is_same_v<T, std::string>)
      return "a string";
    else
      return "an integer";
  }
  // An array, each element of which `each` takes: "" when it took it, else why it is refused, which
  // refuses the key (the elements before it stay taken, but the load fails).
  using ReadElement = std::function<std::string(const toml::node&)>;
  void read_array(const char* key, const char* array_of, const ReadElement& each);

  static std::string describe(const toml::node& node);

  const toml::table& table_;
  std::string prefix_;
  std::string& error_;
  std::set<std::string> seen_;
};

std::string positive_ms(const std::int64_t& v);

// A node's TOML type, for a refusal ("must be an integer, not string").
std::string describe_node(const toml::node& node);

// The environment variable's value; nullptr when it is unset or empty.
const char* env(const char* name);

}  // namespace mh::daemon::config_tables
