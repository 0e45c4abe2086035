// An ext4 filesystem in an image file, loop-mounted for a test's life (needs root, e2fsprogs and a
// loop device): a disk a test may fill where a tmpfs's page slack would hide ENOSPC (issue 29).
#pragma once

#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace mh::test {

// An ext4 filesystem of `bytes` in an image file, on `dir` (made here) through a loop device, for
// the test's life; unmounted, its loop device let go, by what it created. 1 KiB blocks and no
// blocks reserved for root: a write that needs a block fails ENOSPC, with at most the tail of the
// file's last block as slack (a tmpfs has up to a page per file, which hid the failing close).
class LoopExt4 {
 public:
  LoopExt4(const std::filesystem::path& image, const std::filesystem::path& dir, std::uintmax_t bytes)
      : image_(image), dir_(dir) {
    std::filesystem::create_directories(dir_);
    { std::ofstream(image_).close(); }
    std::error_code ec;
    std::filesystem::resize_file(image_, bytes, ec);
    if (ec) {
      fail("resize " + image_.string() + ": " + ec.message());
      return;
    }
    if (std::system(("mkfs.ext4 -q -F -b 1024 -m 0 '" + image_.string() + "' >/dev/null 2>&1").c_str()) != 0) {
      fail("mkfs.ext4 failed (is e2fsprogs installed?)");
      return;
    }
    std::FILE* p = ::popen(("losetup --find --show '" + image_.string() + "' 2>&1").c_str(), "r");
    if (!p) {
      fail("popen losetup");
      return;
    }
    char buf[256] = {};
    std::string out = std::fgets(buf, sizeof buf, p) ? buf : "";
    const int rc = ::pclose(p);
    if (!out.empty() && out.back() == '\n') out.pop_back();
    if (rc != 0 || out.rfind("/dev/loop", 0) != 0) {
      fail("losetup: " + out);
      return;
    }
    device_ = out;
    if (::mount(device_.c_str(), dir_.c_str(), "ext4", MS_NOSUID | MS_NODEV, nullptr) != 0) {
      fail(std::string("mount ext4: ") + std::strerror(errno));
      return;
    }
    mounted_ = true;
    ::chmod(dir_.c_str(), 0755);
  }
  ~LoopExt4() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
    // On a device still busy (a lazy unmount), the kernel lets it go at its last user.
    if (!device_.empty()) (void)std::system(("losetup -d '" + device_ + "' >/dev/null 2>&1").c_str());
    std::error_code ec;
    std::filesystem::remove(image_, ec);
  }
  LoopExt4(const LoopExt4&) = delete;
  LoopExt4& operator=(const LoopExt4&) = delete;
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }

 private:
  void fail(std::string why) { error_ = std::move(why); }
  std::filesystem::path image_, dir_;
  std::string device_;
  bool mounted_ = false;
  std::string error_;
};

}  // namespace mh::test
