// Reading a verb's input file whole: the one place the CLI turns a path into its bytes.
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/verbs.hpp"

namespace mh::cli {

std::optional<std::string> read_file_bytes(const std::string& path, std::string& error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot read " + path;
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<std::string> read_input(const std::string& path, std::string& error) {
  if (path != "-") return read_file_bytes(path, error);
  std::ostringstream ss;
  ss << std::cin.rdbuf();
  return ss.str();
}

}  // namespace mh::cli
