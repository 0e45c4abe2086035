// A file that fills its filesystem to ENOSPC for a test (issue 29), removed at the end of its scope.
#pragma once

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>

namespace mh::test {

// A file that takes every free byte of its filesystem (written until ENOSPC); removed by free()
// or at the end of its scope.
class DiskFiller {
 public:
  explicit DiskFiller(std::filesystem::path file) : file_(std::move(file)) {
    std::FILE* f = std::fopen(file_.c_str(), "wb");
    if (!f) return;
    const std::string block(4096, 'x');
    while (std::fwrite(block.data(), 1, block.size(), f) == block.size() && std::fflush(f) == 0) {
    }
    // The last partial block: byte by byte, so not even a page is left.
    while (std::fputc('x', f) != EOF && std::fflush(f) == 0) {
    }
    filled_ = errno == ENOSPC;
    std::fclose(f);
  }
  ~DiskFiller() { free(); }
  DiskFiller(const DiskFiller&) = delete;
  DiskFiller& operator=(const DiskFiller&) = delete;
  bool filled() const { return filled_; }
  void free() {
    std::error_code ec;
    std::filesystem::remove(file_, ec);
  }

 private:
  std::filesystem::path file_;
  bool filled_ = false;
};

}  // namespace mh::test
