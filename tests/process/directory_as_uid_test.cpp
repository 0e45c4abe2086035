// The check a root daemon makes of a cwd named by a peer below admin, as that peer
// (directory_as_uid): a forked child with the peer's uid resolves the path and the kernel judges
// what it reached. Real uids (nobody), real directories; needs root.
#include "daemon/process/directory_as_uid.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "daemon/process/directory_identity_of.hpp"
#include "process_test_support.hpp"

namespace mh::daemon::test {
namespace {

constexpr uid_t kNobody = 65534;

class DirectoryAsUid : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: the check takes another uid";
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);  // made 0700; the peer must pass it
    for (auto p = dir_.path(); p != p.root_path(); p = p.parent_path()) {
      struct stat st {};
      ASSERT_EQ(::stat(p.c_str(), &st), 0) << p;
      if ((st.st_mode & S_IXOTH) == 0) GTEST_SKIP() << p << " does not let another uid pass";
    }
  }
  TempDir dir_;
};

// What the peer reached: its real path (through a link), and which directory that is (device
// and inode), the identity the bind later insists on.
TEST_F(DirectoryAsUid, SaysTheRealPathAndTheIdentityOfWhatThePeerReached) {
  const auto mine = dir_.path() / "mine";
  std::filesystem::create_directory(mine);
  ASSERT_EQ(::chown(mine.c_str(), kNobody, kNobody), 0);
  std::filesystem::create_directory_symlink(mine, dir_.path() / "link");
  auto judged = directory_as_uid((dir_.path() / "link").string(), kNobody, kNobody, {});
  ASSERT_TRUE(judged) << judged.error();
  EXPECT_EQ(judged->real_path, std::filesystem::canonical(mine).string());
  struct stat st {};
  ASSERT_EQ(::stat(mine.c_str(), &st), 0);
  EXPECT_EQ(judged->identity.device, static_cast<std::uint64_t>(st.st_dev));
  EXPECT_EQ(judged->identity.inode, static_cast<std::uint64_t>(st.st_ino));
  EXPECT_EQ(judged->identity, identity_of(AT_FDCWD, mine.c_str())) << "its birth too, where the file system keeps one";
}

// A directory the peer may enter and read but not write is refused, in words naming the uid only.
TEST_F(DirectoryAsUid, ADirectoryThePeerMayNotWriteIsRefused) {
  const auto roots = dir_.path() / "roots";
  std::filesystem::create_directory(roots);
  ASSERT_EQ(::chmod(roots.c_str(), 0755), 0);
  auto judged = directory_as_uid(roots.string(), kNobody, kNobody, {});
  ASSERT_FALSE(judged);
  EXPECT_NE(judged.error().find("uid 65534 cannot reach it"), std::string::npos) << judged.error();
}

// Past its bound the check's child is killed and reaped, and the answer is no, naming the bound
// (a peer may stop the child, which runs as it, or name a file system that never answers).
TEST_F(DirectoryAsUid, PastItsBoundTheChildIsKilledAndTheCwdRefused) {
  const auto mine = dir_.path() / "mine";
  std::filesystem::create_directory(mine);
  ASSERT_EQ(::chown(mine.c_str(), kNobody, kNobody), 0);
  auto judged = directory_as_uid(mine.string(), kNobody, kNobody, {}, std::chrono::milliseconds(0));
  ASSERT_FALSE(judged);
  EXPECT_NE(judged.error().find("did not resolve it within 0 ms"), std::string::npos) << judged.error();
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1) << "a child of the check was left unreaped";
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace
}  // namespace mh::daemon::test
