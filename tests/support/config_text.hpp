// The daemon's config read from TOML text, as the tests of its keys write it.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <initializer_list>
#include <string>

#include "daemon/config/config.hpp"
#include "tests/support/cli_process.hpp"

namespace mh::test {

using LoadedConfig = boost::system::result<daemon::DaemonConfig, std::string>;

// `toml` written to a scratch file (its directory named for `label` and the pid, gone afterwards)
// and loaded as the daemon loads its --config.
inline LoadedConfig load_config_text(const std::string& toml, const std::string& label = "config") {
  TempDir dir(label);
  auto path = dir.path() / "c.toml";
  std::ofstream(path) << toml;
  return daemon::load_config(path);
}

// Success when `toml` is refused with an error holding every one of `words`; else a failure that
// shows what loaded or what the error said.
inline ::testing::AssertionResult refused_naming(const std::string& toml, std::initializer_list<std::string> words) {
  auto c = load_config_text(toml);
  if (c) return ::testing::AssertionFailure() << "loaded: " << toml;
  for (const auto& w : words)
    if (c.error().find(w) == std::string::npos)
      return ::testing::AssertionFailure() << "the refusal \"" << c.error() << "\" does not name \"" << w << "\"";
  return ::testing::AssertionSuccess();
}

}  // namespace mh::test
