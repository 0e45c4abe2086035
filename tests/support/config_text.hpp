// The daemon's config read from TOML text, as the tests of its keys write it.
#pragma once

#include <fstream>
#include <string>

#include "daemon/server/config.hpp"
#include "tests/support/cli_process.hpp"

namespace mh::test {

// `toml` written to a scratch file (its directory named for `label`, gone afterwards) and loaded
// as the daemon loads its --config.
inline boost::system::result<daemon::DaemonConfig, std::string> load_config_text(const std::string& toml,
                                                                                 const std::string& label) {
  TempDir dir(label);
  auto path = dir.path() / "c.toml";
  std::ofstream(path) << toml;
  return daemon::load_config(path);
}

}  // namespace mh::test
