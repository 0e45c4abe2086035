#include "testkit/bench_args.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>

namespace mh::testkit {

bool parse_bench_args(int argc, char** argv, std::string_view program, const BenchArgs& args,
                      void (*usage)(std::ostream&)) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    try {
      if (a == "-h" || a == "--help") {
        usage(std::cout);
        std::exit(0);
      }
      if (auto s = args.switches.find(a); s != args.switches.end()) {
        *s->second = true;
      } else if (auto v = args.values.find(a); v != args.values.end()) {
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        v->second(argv[++i]);
      } else {
        throw std::invalid_argument("unknown option " + a);
      }
    } catch (const std::exception& e) {
      std::cerr << program << ": " << e.what() << "\n";
      usage(std::cerr);
      return false;
    }
  }
  return true;
}

std::string prepare_work_root(std::filesystem::path& root, std::string_view stem) {
  if (root.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + std::string(stem) + ".XXXXXX";
    if (!::mkdtemp(pattern.data())) return std::string("mkdtemp: ") + std::strerror(errno);
    // Traversable by others: under a root daemon each run has a uid of its own, and its stand-in
    // reads its script from here (mkdtemp's 0700 would fail every run, "cannot read the script").
    if (::chmod(pattern.c_str(), 0755) != 0) return std::string("chmod: ") + std::strerror(errno);
    root = pattern;
  }
  root = std::filesystem::absolute(root);
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) return "cannot create " + root.string() + ": " + ec.message();
  return "";
}

}  // namespace mh::testkit
