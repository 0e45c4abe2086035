// HookLog: the run's hook channel traffic, both directions, one line per message
// (vendor-hooks.jsonl), whichever body carries the channel (a direct run's socket, or the run's
// supervisor), so the vendor traffic is retained whole. Redacted with the run's secrets.
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "daemon/run/append_file.hpp"
#include "daemon/stream/redactor.hpp"

namespace mh::daemon {

class HookLog {
 public:
  // `redactor`: the run's, which outlives the log (and may be replaced while the run is made).
  explicit HookLog(const Redactor& redactor) : redactor_(redactor) {}

  bool open(const std::filesystem::path& path, std::string& error) { return file_.open(path, error); }
  // One message on `connection`; `direction` "in" (from the vendor) or "out" (its answer).
  void append(std::uint64_t connection, std::string_view direction, const boost::json::value& message);

 private:
  const Redactor& redactor_;
  AppendFile file_;
};

}  // namespace mh::daemon
