// Adoption does not wait on the vendor binary's digest (issue 27 section 6): Run::adopt, which runs
// on the thread that adopts (the daemon's start), reads no binary; the run's way up keeps the
// digest on the hashing thread (VendorProvenance::keep) before its session opens. The binary here
// is a file of the test's own, never digested before the adoption, so a read would be counted.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <fstream>

#include "adapters/claude/claude_adapter.hpp"
#include "adapters/registry.hpp"
#include "daemon/process/vendor_provenance.hpp"
#include "daemon/run/run.hpp"

namespace mh::daemon {
namespace {

namespace fs = std::filesystem;

class AdoptDigest : public ::testing::Test {
 protected:
  AdoptDigest() {
    char pattern[] = "/tmp/mh-adopt-digest-XXXXXX";
    const char* made = ::mkdtemp(pattern);
    EXPECT_NE(made, nullptr);
    root = made ? made : "/nonexistent";
    binary = adapters::claude::default_binary(root / "vendor");
    fs::create_directories(binary.parent_path());
    std::ofstream(binary) << "#!/bin/sh\n# " << root.string() << "\n";  // unique: never digested before
    fs::permissions(binary, fs::perms::owner_all);
  }
  ~AdoptDigest() override {
    std::error_code ec;
    fs::remove_all(root, ec);
  }

  RunOptions options() const {
    RunOptions o;
    o.spec.run_id = "r-adopt";
    o.spec.adapter = "claude";
    o.spec.prompt = "p";
    o.spec.model_endpoint = adapters::ModelEndpoint{"http://127.0.0.1:9", "token"};  // never reached
    o.run_dir = root / "runs/r-adopt";
    o.supervision = RunOptions::Supervision{};
    o.supervision->attach_within = std::chrono::milliseconds(200);  // no supervisor will answer
    return o;
  }

  fs::path root;
  fs::path binary;
};

TEST_F(AdoptDigest, RunAdoptReadsNoBinaryItsWayUpKeepsTheDigestOffTheAdoptingThread) {
  adapters::AdapterRegistry registry{adapters::HostConfig{root / "vendor", {}}};
  const adapters::Adapter* adapter = registry.find("claude");
  ASSERT_NE(adapter, nullptr);
  boost::asio::io_context io;
  {
    // The run a previous daemon made (its spec and record); it is never started here.
    auto created = Run::create(io, *adapter, options());
    ASSERT_TRUE(created) << created.error();
  }
  std::ofstream(binary, std::ios::app) << "# changed since: its digest is not kept\n";
  VendorProvenance& provenance = shared_vendor_provenance();
  const std::uint64_t before = provenance.files_digested();
  auto adopted = Run::adopt(io, *adapter, options());
  ASSERT_TRUE(adopted) << adopted.error();
  EXPECT_EQ(provenance.files_digested(), before) << "Run::adopt read the vendor binary on the adopting thread";

  // Its way up: the digest is kept (on the hashing thread) before the supervisor is looked for;
  // none answers here, so the run is then closed as one that cannot be adopted.
  bool closed = false;
  (*adopted)->start([&](const RunOutcome&) { closed = true; });
  io.run();
  EXPECT_TRUE(closed);
  EXPECT_EQ(provenance.files_digested(), before + 1) << "the way up keeps the binary's digest";
}

}  // namespace
}  // namespace mh::daemon
