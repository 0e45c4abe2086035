#include "daemon/stream/redactor.hpp"

#include <algorithm>

#include "protocol/json.hpp"

namespace mh::daemon {

namespace {

// The text as it stands between the quotes of a JSON string the protocol writes.
std::string escaped(const std::string& value) {
  std::string out;
  protocol::JsonWriter w(out);
  w.string(value);
  return out.size() >= 2 ? out.substr(1, out.size() - 2) : std::string();
}

std::string marker_name(const std::string& name) {
  std::string out;
  for (char c : name) {
    const bool plain =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    out.push_back(plain ? c : '_');
  }
  return out.empty() ? std::string("secret") : out;
}

}  // namespace

Redactor::Redactor(const std::vector<std::pair<std::string, std::string>>& secrets) {
  for (const auto& [name, value] : secrets) {
    if (value.size() < kMinRedactedBytes) continue;
    const std::string marker = "[redacted:" + marker_name(name) + "]";
    std::string once = escaped(value);
    std::string twice = escaped(once);
    for (std::string* needle : {&once, &twice})
      if (!needle->empty() &&
          std::none_of(patterns_.begin(), patterns_.end(), [&](const Pattern& p) { return p.needle == *needle; }))
        patterns_.push_back(Pattern{*needle, marker});
  }
  std::stable_sort(patterns_.begin(), patterns_.end(),
                   [](const Pattern& a, const Pattern& b) { return a.needle.size() > b.needle.size(); });
}

std::size_t Redactor::redact(std::string& text, std::size_t from) const {
  std::size_t replaced = 0;
  for (const auto& p : patterns_) {
    for (std::size_t at = text.find(p.needle, from); at != std::string::npos; at = text.find(p.needle, at)) {
      text.replace(at, p.needle.size(), p.marker);
      at += p.marker.size();
      ++replaced;
    }
  }
  return replaced;
}

}  // namespace mh::daemon
