// What the daemon metrics tests share: a daemon on the stand-in harness with [http] on an
// ephemeral loopback port, its bound address (<state_dir>/http.addr), and /metrics read as
// series -> value.
#pragma once

#include <map>
#include <sstream>
#include <string>

#include "tests/http/http_test_client.hpp"
#include "tests/support/daemon_harness.hpp"

namespace mh::test {

// The stand-in harness in place of claude; [http] on 127.0.0.1, any free port; `more`: more tables.
std::string metrics_daemon_config(const std::string& more = "");
// A run of the stand-in playing `script` (tests/standin/scripts), with more run fields.
std::string standin_run_fields(const std::string& script, const std::string& extra = "");
// The address in <state_dir>/http.addr ("" when the file is absent).
std::string http_address(const DaemonUnderTest& daemon);
// A page's samples: series (name and labels, as written) -> value. Inline, so the unit tests use
// it without linking the daemon side of this kit.
inline std::map<std::string, std::string> parse_samples(const std::string& page) {
  std::map<std::string, std::string> out;
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    auto space = line.rfind(' ');
    out[line.substr(0, space)] = line.substr(space + 1);
  }
  return out;
}
// GET /metrics: its samples (empty when the scrape failed; `failure` says why).
std::map<std::string, std::string> scrape(const std::string& address, std::string* failure = nullptr);

}  // namespace mh::test
