// What every bench program does before it measures: read its command line against a table of
// options, and make its work dir.
#pragma once

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>

namespace mh::testkit {

struct BenchArgs {
  // `--name VALUE`: the setter may throw (std::stoi, or std::invalid_argument) to refuse a value.
  std::map<std::string, std::function<void(const std::string&)>, std::less<>> values;
  // `--name`: sets its flag.
  std::map<std::string, bool*, std::less<>> switches;
};

// Applies argv to `args`. -h/--help prints `usage` to stdout and exits 0. False, with the reason
// and the usage on stderr, on an unknown option, a missing value or a refused one.
bool parse_bench_args(int argc, char** argv, std::string_view program, const BenchArgs& args,
                      void (*usage)(std::ostream&));

// `root` as given, or (when empty) a fresh mkdtemp dir `<stem>.XXXXXX` under $TMPDIR (else /tmp);
// made absolute and created. Returns "" or why not.
std::string prepare_work_root(std::filesystem::path& root, std::string_view stem);

}  // namespace mh::testkit
