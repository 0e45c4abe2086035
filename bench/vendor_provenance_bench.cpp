// What naming the vendor binary in every run's attestation costs at launch (issue 27 section 6):
// VendorProvenance::of on each pinned vendor's real binary (./run setup's .vendor/, or
// $METAHARNESS_VENDOR_DIR), read whole by a fresh object (the first run of a binary in a daemon's
// life), and by one that already digested it (every later run: a stat).
#include <benchmark/benchmark.h>

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

BENCHMARK_CAPTURE(BM_Provenance_FirstRun, claude, "claude")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Provenance_FirstRun, codex, "codex")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Provenance_FirstRun, opencode, "opencode")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Provenance_Kept, claude, "claude")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Provenance_Kept, codex, "codex")->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
