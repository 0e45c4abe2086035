// Shared by the stand-in's tests: where the stand-in and its scripts are, and an environment
// that carries a variable on top of ours.
#pragma once

#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "tests/support/cli_process.hpp"

extern char** environ;

namespace mh::test {

inline std::filesystem::path standin_binary() {
  return MH_STANDIN_BIN;
}
inline std::filesystem::path standin_script(const std::string& name) {
  return std::filesystem::path(MH_STANDIN_SCRIPTS) / (name + ".json");
}

// Our environment with NAME=VALUE added (replacing any NAME already there).
inline std::vector<std::string> environment_with(const std::string& name, const std::string& value) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::string_view(*e).substr(0, name.size() + 1) != name + "=") env.emplace_back(*e);
  env.push_back(name + "=" + value);
  return env;
}

inline std::filesystem::path write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  return path;
}

}  // namespace mh::test
