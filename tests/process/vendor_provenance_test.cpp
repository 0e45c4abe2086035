// What a run's attestation says of its vendor binary (issue 27 section 6): the SHA-256 of a file
// of known content, a file that cannot be digested refused by name, the npm package that holds a
// binary (null when there is none, never a guess), a digest kept until the file changes; and the
// install record `vendor install` writes and `audit` reads.
#include "daemon/process/vendor_provenance.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <fstream>
#include <mutex>
#include <thread>

#include "daemon/process/vendor_install_record.hpp"
#include "protocol/digest.hpp"
#include "tests/support/cli_process.hpp"

namespace mh::daemon {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// The FIPS 180-2 test vectors.
constexpr const char* kShaOfAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr const char* kShaOfEmpty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
// SHA-256 of one million 'a' (FIPS 180-2, B.3): more than one 1 MiB read apart.
constexpr const char* kShaOfMillionA = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";

fs::path write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << text;
  return file;
}

// The digest, or a failed check naming why there is none.
std::string sha_of(const fs::path& file) {
  auto sha = VendorProvenance::file_sha256(file);
  if (!sha) {
    ADD_FAILURE() << sha.error();
    return "";
  }
  return *sha;
}

class Provenance : public ::testing::Test {
 protected:
  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
};

TEST_F(Provenance, AFileOfKnownContentHasItsKnownDigest) {
  EXPECT_EQ(sha_of(write(dir.path() / "abc", "abc")), kShaOfAbc);
  EXPECT_EQ(sha_of(write(dir.path() / "empty", "")), kShaOfEmpty);
  EXPECT_EQ(sha_of(write(dir.path() / "million", std::string(1'000'000, 'a'))), kShaOfMillionA);
  // Read in 1 MiB chunks: a file of three and a half is the digest of its whole content.
  std::string big(3 * (1 << 20) + (1 << 19), '\0');
  for (std::size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<char>(i * 131 % 251);
  EXPECT_EQ(sha_of(write(dir.path() / "big", big)), protocol::sha256_hex(big));
}

TEST_F(Provenance, WhatCannotBeDigestedIsRefusedByNameNeverGivenADigest) {
  auto missing = VendorProvenance::file_sha256(dir.path() / "absent");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(),
            "cannot digest the vendor binary " + (dir.path() / "absent").string() + ": No such file or directory");
  auto directory = VendorProvenance::file_sha256(dir.path());
  ASSERT_FALSE(directory);
  EXPECT_EQ(directory.error(), "cannot digest the vendor binary " + dir.path().string() + ": not a regular file");

  // In the attestation: the path as named, no digest, and why.
  VendorProvenance provenance;
  auto b = provenance.of(dir.path() / "absent");
  EXPECT_EQ(b.path, (dir.path() / "absent").string());
  EXPECT_FALSE(b.sha256);
  ASSERT_TRUE(b.refused);
  EXPECT_NE(b.refused->find("cannot resolve the vendor binary " + (dir.path() / "absent").string()), std::string::npos)
      << *b.refused;
  auto d = provenance.of(dir.path());
  EXPECT_FALSE(d.sha256);
  EXPECT_EQ(d.refused,
            "cannot digest the vendor binary " + fs::canonical(dir.path()).string() + ": not a regular file");
}

// The file exec'd is the link's target: the attestation names it, resolved, with the package
// npm installed it in (a scoped one here) as that package's manifest says.
TEST_F(Provenance, TheResolvedBinaryItsDigestAndItsPackageFromItsOwnManifest) {
  const fs::path package = dir.path() / "vendor/node_modules/@vendor/cli-linux-x64";
  write(package / "package.json", R"({"name":"@vendor/cli-linux-x64","version":"1.2.3"})");
  const fs::path binary = write(package / "bin/cli", "abc");
  fs::create_directories(dir.path() / "links");
  fs::create_symlink(binary, dir.path() / "links/cli");
  VendorProvenance provenance;
  auto b = provenance.of(dir.path() / "links/cli");
  EXPECT_EQ(b.path, fs::canonical(binary).string());
  EXPECT_EQ(b.sha256, kShaOfAbc);
  EXPECT_EQ(b.package, "@vendor/cli-linux-x64");
  EXPECT_EQ(b.version, "1.2.3");
  EXPECT_FALSE(b.refused);

  // Unscoped, and the innermost node_modules/ (a nested dependency).
  const fs::path nested = dir.path() / "vendor/node_modules/outer/node_modules/inner";
  write(dir.path() / "vendor/node_modules/outer/package.json", R"({"name":"outer","version":"9.9.9"})");
  write(nested / "package.json", R"({"name":"inner","version":"0.1.0"})");
  auto n = provenance.of(write(nested / "inner.bin", "abc"));
  EXPECT_EQ(n.package, "inner");
  EXPECT_EQ(n.version, "0.1.0");
}

TEST_F(Provenance, NoPackageOrAManifestThatSaysNoneIsNullNeverAGuess) {
  // Outside any node_modules/: a package.json beside it is not npm's and says nothing.
  write(dir.path() / "plain/package.json", R"({"name":"plain","version":"1.0.0"})");
  EXPECT_EQ(npm_package_of(fs::canonical(write(dir.path() / "plain/cli", "x"))).version, std::nullopt);
  // A package without a manifest, with one that is not JSON, with one whose version is no string.
  const fs::path modules = dir.path() / "vendor/node_modules";
  EXPECT_EQ(npm_package_of(write(modules / "bare/cli", "x")).version, std::nullopt);
  write(modules / "torn/package.json", R"({"version":)");
  EXPECT_EQ(npm_package_of(write(modules / "torn/cli", "x")).name, std::nullopt);
  write(modules / "number/package.json", R"({"name":"number","version":2})");
  auto number = npm_package_of(write(modules / "number/cli", "x"));
  EXPECT_EQ(number.name, "number");
  EXPECT_EQ(number.version, std::nullopt);
  // The folder right under node_modules/ is the package, never the file itself.
  EXPECT_EQ(npm_package_of(write(modules / "loose-file", "x")).name, std::nullopt);
}

// A digest is kept for the file it was computed from: the same file again costs no read, a file
// written since is read again.
TEST_F(Provenance, ADigestIsKeptUntilTheFileChanges) {
  const fs::path binary = write(dir.path() / "cli", "abc");
  VendorProvenance provenance;
  EXPECT_EQ(provenance.of(binary).sha256, kShaOfAbc);
  EXPECT_EQ(provenance.of(binary).sha256, kShaOfAbc);
  EXPECT_EQ(provenance.files_digested(), 1u);
  std::ofstream(binary, std::ios::binary | std::ios::app) << "x";  // a byte appended: size and times move
  EXPECT_EQ(provenance.of(binary).sha256, sha_of(binary));
  EXPECT_NE(provenance.of(binary).sha256, kShaOfAbc);
  EXPECT_EQ(provenance.files_digested(), 2u);
  // Replaced by another file of the same size and content length: another inode, read again.
  const fs::path other = write(dir.path() / "other", "abd");
  fs::rename(other, binary);
  EXPECT_EQ(provenance.of(binary).sha256, sha_of(binary));
  EXPECT_EQ(provenance.files_digested(), 3u);
}

// --- the digest off the io thread ----------------------------------------------------------------

// keep() reads the file on the hashing executor, never the awaiting coroutine's: while the digest
// waits for the hashing context, the caller's context runs its other handlers (another run's
// lines), and the coroutine resumes on its own context once the digest is kept. A digest kept
// already costs the caller no trip to the hashing context.
TEST_F(Provenance, KeepDigestsOnTheHashingExecutorAndResumesTheCallerOnItsOwn) {
  namespace asio = boost::asio;
  const fs::path binary = write(dir.path() / "cli", "abc");
  asio::io_context caller, hashing;
  VendorProvenance provenance(hashing.get_executor());
  bool kept = false, other_ran = false;
  std::thread::id resumed_on;
  auto keeping = [&]() -> asio::awaitable<void> {
    co_await provenance.keep(binary);
    kept = true;
    resumed_on = std::this_thread::get_id();
  };
  asio::co_spawn(caller, keeping, asio::detached);
  asio::post(caller, [&] { other_ran = true; });
  caller.poll();
  EXPECT_TRUE(other_ran) << "the caller's context went on";
  EXPECT_FALSE(kept);
  EXPECT_EQ(provenance.files_digested(), 0u) << "nothing was read on the caller's context";

  hashing.poll();
  EXPECT_EQ(provenance.files_digested(), 1u) << "read on the hashing context";
  EXPECT_FALSE(kept) << "the caller resumes on its own context, not the hashing one";
  caller.restart();
  caller.poll();
  EXPECT_TRUE(kept);
  EXPECT_EQ(resumed_on, std::this_thread::get_id());
  EXPECT_EQ(provenance.of(binary).sha256, kShaOfAbc);
  EXPECT_EQ(provenance.files_digested(), 1u) << "of() then reads nothing";

  kept = false;
  asio::co_spawn(caller, keeping, asio::detached);
  caller.restart();
  caller.poll();
  EXPECT_TRUE(kept) << "kept already: done without the hashing context";
  hashing.restart();
  EXPECT_EQ(hashing.poll(), 0u);

  // No binary known, or one that cannot be read: nothing kept, of() refuses it by name.
  bool none_done = false;
  auto keeping_none = [&]() -> asio::awaitable<void> {
    co_await provenance.keep(std::nullopt);
    none_done = true;
  };
  asio::co_spawn(caller, keeping_none, asio::detached);
  caller.restart();
  caller.poll();
  EXPECT_TRUE(none_done);
}

// First runs of one binary arriving together, from several io threads at once, while other runs
// call of() directly: the shared map is consulted from every thread (the digest cache's lock),
// every caller gets the one digest, and the file is read once (the hashing thread takes one at a
// time, so the later ones find it kept).
TEST_F(Provenance, FirstRunsArrivingTogetherReadTheBinaryOnce) {
  namespace asio = boost::asio;
  const fs::path binary = write(dir.path() / "cli", std::string(4 << 20, 'a'));
  const std::string expected = sha_of(binary);
  VendorProvenance provenance;  // its own hashing thread
  asio::thread_pool io(4);
  constexpr int kRuns = 16;
  std::mutex mutex;
  std::vector<std::optional<std::string>> seen;
  for (int i = 0; i < kRuns; ++i) {
    auto run = [&]() -> asio::awaitable<void> {
      co_await provenance.keep(binary);
      auto b = provenance.of(binary);
      std::lock_guard lock(mutex);
      seen.push_back(b.sha256);
    };
    asio::co_spawn(io, run, asio::detached);
  }
  io.join();
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(kRuns));
  for (const auto& sha : seen)
    EXPECT_EQ(sha, expected);
  EXPECT_EQ(provenance.files_digested(), 1u);
}

// --- the install record ------------------------------------------------------------------------

TEST_F(Provenance, TheInstallRecordReadsBackWhatWasWrittenAndNamesWhatItLacks) {
  InstallRecord record;
  record.recorded_at = "2026-12-06T18:00:00.000Z";
  record.binaries.push_back({"claude", "@anthropic-ai/claude-code", "2.1.197", "/v/claude", kShaOfAbc});
  const fs::path file = InstallRecord::path_in(dir.path());
  ASSERT_EQ(record.write(file), std::nullopt);
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  auto back = InstallRecord::read(file);
  ASSERT_TRUE(back) << back.error();
  ASSERT_EQ(back->binaries.size(), 1u);
  EXPECT_EQ(back->binaries[0].sha256, kShaOfAbc);
  EXPECT_EQ(back->recorded_at, record.recorded_at);

  auto claude = InstallRecord::fact_for(file, "claude");
  ASSERT_TRUE(claude.entry);
  EXPECT_EQ(claude.entry->path, "/v/claude");
  auto codex = InstallRecord::fact_for(file, "codex");
  EXPECT_FALSE(codex.entry);
  EXPECT_EQ(codex.why_none, "the install record " + file.string() + " names no codex binary");
  auto none = InstallRecord::fact_for(dir.path() / "nowhere.json", "claude");
  EXPECT_FALSE(none.entry);
  EXPECT_EQ(none.why_none, "no install record at " + (dir.path() / "nowhere.json").string() +
                               ": nobody recorded which binary `vendor install` installed");
}

TEST_F(Provenance, AnInstallRecordThatIsNotOneIsRefusedByName) {
  const fs::path file = dir.path() / "installed.json";
  write(file, R"({"format":"something-else/1","binaries":[]})");
  bool absent = true;
  auto other = InstallRecord::read(file, &absent);
  ASSERT_FALSE(other);
  EXPECT_FALSE(absent);
  EXPECT_EQ(other.error(), "the install record " + file.string() + " is not a metaharness.vendor-install/1 document");
  write(file, R"({"format":"metaharness.vendor-install/1","binaries":[{"adapter":"claude","package":"p",)"
              R"("version":"1","path":"/x","sha256":"ABC"}]})");
  auto bad = InstallRecord::read(file);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("names a digest for claude that is not 64 lowercase hex characters"), std::string::npos);
  // The floor is told why: unknown, never a pass.
  auto fact = InstallRecord::fact_for(file, "claude");
  EXPECT_FALSE(fact.entry);
  EXPECT_EQ(fact.why_none, bad.error());
  InstallRecord::read(dir.path() / "absent.json", &absent);
  EXPECT_TRUE(absent);
}

// The daemon reads the record at every `get` on an io thread: what stands in its place is refused
// by name, never waited on or read without bound. A FIFO nobody writes (opening it to read would
// block forever) and a directory are not regular files; a file grown past 1 MiB is not read whole.
TEST_F(Provenance, AnInstallRecordIsReadWithoutBlockingAndWithinItsBound) {
  const fs::path fifo = dir.path() / "fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  bool absent = true;
  auto from_fifo = InstallRecord::read(fifo, &absent);
  ASSERT_FALSE(from_fifo);
  EXPECT_FALSE(absent);
  EXPECT_EQ(from_fifo.error(), "the install record " + fifo.string() + " is not a regular file");
  auto from_folder = InstallRecord::read(dir.path());
  ASSERT_FALSE(from_folder);
  EXPECT_EQ(from_folder.error(), "the install record " + dir.path().string() + " is not a regular file");
  const fs::path large = write(dir.path() / "large.json", std::string((1 << 20) + 1, ' '));
  auto too_large = InstallRecord::read(large);
  ASSERT_FALSE(too_large);
  EXPECT_EQ(too_large.error(), "the install record " + large.string() + " is larger than 1 MiB");
  EXPECT_EQ(InstallRecord::fact_for(fifo, "claude").why_none, from_fifo.error());
}

}  // namespace
}  // namespace mh::daemon
