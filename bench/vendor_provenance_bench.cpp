// What naming the vendor binary in every run's attestation costs at launch (issue 27 section 6):
// VendorProvenance::of on each pinned vendor's real binary (./run setup's .vendor/, or
// $METAHARNESS_VENDOR_DIR), read whole by a fresh object (the first run of a binary in a daemon's
// life), and by one that already digested it (every later run: a stat); and what a daemon's io
// thread spends of a first run's digest now that keep() reads the file on the hashing thread.
#include <benchmark/benchmark.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <filesystem>

#include "adapters/host_config.hpp"
#include "adapters/vendor_descriptor.hpp"
#include "daemon/process/vendor_provenance.hpp"

namespace {

using mh::daemon::VendorProvenance;

std::filesystem::path binary_of(std::string_view adapter) {
  const auto* vendor = mh::adapters::find_vendor(adapter);
  return vendor ? vendor->default_binary(mh::adapters::host_config_from_environment().vendor_dir)
                : std::filesystem::path();
}

void BM_Provenance_FirstRun(benchmark::State& state, std::string_view adapter) {
  const auto binary = binary_of(adapter);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(binary, ec)) {
    state.SkipWithError(("no " + std::string(adapter) + " binary at " + binary.string()).c_str());
    return;
  }
  for (auto _ : state) {
    VendorProvenance fresh;
    auto b = fresh.of(binary);
    if (!b.sha256) state.SkipWithError(b.refused.value_or("not digested").c_str());
    benchmark::DoNotOptimize(b);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(std::filesystem::file_size(binary)));
}

void BM_Provenance_Kept(benchmark::State& state, std::string_view adapter) {
  const auto binary = binary_of(adapter);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(binary, ec)) {
    state.SkipWithError(("no " + std::string(adapter) + " binary at " + binary.string()).c_str());
    return;
  }
  VendorProvenance kept;
  (void)kept.of(binary);
  for (auto _ : state)
    benchmark::DoNotOptimize(kept.of(binary));
  if (kept.files_digested() != 1) state.SkipWithError("the kept digest was not used");
}

// The io thread's part of a binary's first digest: from the submit's co_await of keep() until
// the thread is free again (the digest itself then runs on the hashing context, untimed).
void BM_Provenance_FirstKeep_IoThread(benchmark::State& state, std::string_view adapter) {
  namespace asio = boost::asio;
  const auto binary = binary_of(adapter);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(binary, ec)) {
    state.SkipWithError(("no " + std::string(adapter) + " binary at " + binary.string()).c_str());
    return;
  }
  for (auto _ : state) {
    asio::io_context io, hashing;
    VendorProvenance fresh(hashing.get_executor());
    auto submit = [&]() -> asio::awaitable<void> { co_await fresh.keep(binary); };
    asio::co_spawn(io, submit, asio::detached);
    auto start = std::chrono::steady_clock::now();
    io.poll();  // until the coroutine waits for the digest
    auto io_thread = std::chrono::steady_clock::now() - start;
    hashing.run();
    io.restart();
    io.run();
    if (fresh.files_digested() != 1) state.SkipWithError("the digest was not taken");
    state.SetIterationTime(std::chrono::duration<double>(io_thread).count());
  }
}

// Every registered vendor, in registration order (no table of vendors here): its first run's
// digest, a kept one, and the io thread's share of a first keep.
void register_each_vendor() {
  for (const mh::adapters::VendorDescriptor* vendor : mh::adapters::vendor_descriptors()) {
    const std::string id(vendor->id);
    const std::string_view adapter = vendor->id;
    benchmark::RegisterBenchmark(("BM_Provenance_FirstRun/" + id).c_str(), BM_Provenance_FirstRun, adapter)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("BM_Provenance_Kept/" + id).c_str(), BM_Provenance_Kept, adapter)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("BM_Provenance_FirstKeep_IoThread/" + id).c_str(), BM_Provenance_FirstKeep_IoThread,
                                 adapter)
        ->Unit(benchmark::kMicrosecond)
        ->UseManualTime()
        ->Iterations(5);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_each_vendor();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
