#!/usr/bin/env bash
# Runs the benchmark programs of a build, one function per program, one program at a time (the
# figures are only comparable on a machine that is otherwise quiet). Called by `./run bench` as
#   scripts/bench.sh <build/bin directory>
# Figures are copied into bench/RESULTS.md by hand, with the machine they were taken on.
#
# Environment: MH_BENCH_REPETITIONS (default 10), MH_BENCH_ONLY (names of bench functions to run),
# MH_SEAM_RUNS / MH_SEAM_JSON (see bench_seam), MH_<VENDOR>_SEAM_RUNS / _JSON (see
# bench_vendor_seams), MH_DAEMON_BENCH_ARGS / MH_DAEMON_JSON (see bench_daemon).
set -euo pipefail

BIN="${1:?usage: scripts/bench.sh <build/bin directory>}"
REPETITIONS="${MH_BENCH_REPETITIONS:-10}"

say() { printf '%s\n' "bench: $*" >&2; }

# Runs one Google Benchmark program with the repetition settings every bench shares; extra
# arguments (e.g. --benchmark_filter=...) are passed through. Prints the aggregates.
# Repetitions of the program's benchmarks are interleaved at random, so a burst of load from
# elsewhere on the machine lands on all of them alike rather than on whichever ran at the time.
run_benchmark() {
  local program="$BIN/$1"
  shift
  [ -x "$program" ] || { say "missing $program (build first)"; return 1; }
  "$program" --benchmark_repetitions="$REPETITIONS" --benchmark_report_aggregates_only=true \
    --benchmark_enable_random_interleaving=true "$@"
}

# Median time of benchmark $2 in Google Benchmark console output $1, in nanoseconds; $3 picks
# the column: real (wall clock, the default) or cpu.
median_ns() {
  printf '%s\n' "$1" | awk -v name="$2_median" -v column="${3:-real}" '
    $1 == name {
      scale["ns"] = 1; scale["us"] = 1e3; scale["ms"] = 1e6; scale["s"] = 1e9
      if (column == "cpu") printf "%.0f\n", $4 * scale[$5]; else printf "%.0f\n", $2 * scale[$3]
      found = 1; exit
    }
    END { if (!found) exit 1 }'
}

# The attestation's vendor binary (issue 27 section 6): each pinned binary digested by a fresh
# VendorProvenance (a binary's first run in a daemon's life) and by one that kept it (every later
# run). No goal: the figures are reported.
bench_provenance() {
  say "provenance: the vendor binary's digest at launch, $REPETITIONS repetitions"
  run_benchmark mh_vendor_provenance_bench
}

# Protocol: typed layer (read_event_line + serialize) against raw Boost.JSON (parse +
# serialize) on the same generated stream. Goal: typed costs at most 2x raw.
bench_protocol() {
  say "protocol: typed layer vs raw Boost.JSON, $REPETITIONS repetitions"
  local out typed raw typed_cpu raw_cpu
  out="$(run_benchmark mh_protocol_bench)"
  printf '%s\n' "$out"
  typed="$(median_ns "$out" BM_Typed_ReadAndSerialize)"
  raw="$(median_ns "$out" BM_Raw_BoostJsonParseAndSerialize)"
  typed_cpu="$(median_ns "$out" BM_Typed_ReadAndSerialize cpu)"
  raw_cpu="$(median_ns "$out" BM_Raw_BoostJsonParseAndSerialize cpu)"
  # The goal is judged on CPU time, which load from elsewhere disturbs least.
  awk -v typed="$typed" -v raw="$raw" -v typed_cpu="$typed_cpu" -v raw_cpu="$raw_cpu" 'BEGIN {
    printf "protocol: median real time typed %.2f ms, raw %.2f ms, ratio %.2f\n", typed / 1e6, raw / 1e6, typed / raw
    printf "protocol: median CPU time  typed %.2f ms, raw %.2f ms, ratio %.2f (goal <= 2.00)\n",
           typed_cpu / 1e6, raw_cpu / 1e6, typed_cpu / raw_cpu
    exit (typed_cpu / raw_cpu <= 2.0 ? 0 : 1)
  }' || { say "protocol: the typed layer costs more than 2x raw Boost.JSON"; return 1; }
}

# The default row's call seam (issue 3; mh_seam_bench with no --vendor, marked default by
# --list-vendors): the real CLI against the scripted model endpoint, 40 sequential shell calls per
# turn, four variants interleaved round-robin (no hook, a bare in-band driver, a command hook,
# metaharness ask mode). Minutes of wall time; nothing else heavy should
# run meanwhile. Goals: metaharness's added time per call within 1 ms of the bare driver and at
# most half the command hook's; its own in-process share p50 <= 100 us, p99 <= 1 ms.
# Environment: MH_SEAM_RUNS (measured rounds, default 7), MH_SEAM_JSON (summary file, default
# seam-bench.json in a fresh temporary directory, named in the output).
bench_seam() {
  local program="$BIN/mh_seam_bench"
  [ -x "$program" ] || { say "missing $program (build first)"; return 1; }
  [ -x "$BIN/metaharness" ] || { say "missing $BIN/metaharness (build first)"; return 1; }
  local runs="${MH_SEAM_RUNS:-7}" out vendor
  vendor="$("$program" --list-vendors | awk '$2 == "default" { print $1 }')"
  say "seam: $vendor call seam, $runs interleaved rounds of 4 variants (this takes minutes)"
  local args=(--runs "$runs" --metaharness "$BIN/metaharness")
  [ -n "${MH_SEAM_JSON:-}" ] && args+=(--json "$MH_SEAM_JSON")
  out="$("$program" "${args[@]}")" || { printf '%s\n' "$out"; say "seam: a variant did not complete"; return 1; }
  printf '%s\n' "$out"
  if printf '%s\n' "$out" | grep -q '^seam: goal .* FAIL$'; then
    say "seam: a goal is not met (see above)"
    return 1
  fi
}

# The daemon (issue 4): the real `metaharness daemon` hosting the stand-in harness
# (tests/standin, found beside the bench) in one invocation: the decision round trip at the harness (100 runs deciding
# concurrently, at think times 50, 10 and 0 ms; the first is judged) beside a Unix-socket
# ping-pong as the floor; the daemon's memory per idle run (1,000 runs parked mid-turn); stream
# throughput of one chatty run to one reader, alone and with a stalled reader attached; start to
# READY=1 with 1,000 finished runs on disk. About 3 minutes and 1,000 stand-in processes at the
# peak; nothing else heavy should run meanwhile. Goals: round trip p50 <= 200 us and p99 <= 2 ms
# (issue 4), and at think 50 ms the daemon's CPU <= 80 us per decision, p50 <= 120 us, p99 <= 1 ms
# (issue 10), each printed beside what this machine's floor allows; <= 64 KiB per idle run; >= 100,000 events/s and < 10% drop with the stalled reader; READY
# <= 50 ms. Environment: MH_DAEMON_BENCH_ARGS (extra arguments, e.g. "--only round_trip"),
# MH_DAEMON_JSON (summary file, default daemon-bench.json in a fresh temporary directory, named
# in the output).
bench_daemon() {
  local program="$BIN/mh_daemon_bench"
  [ -x "$program" ] || { say "missing $program (build first)"; return 1; }
  [ -x "$BIN/metaharness" ] || { say "missing $BIN/metaharness (build first)"; return 1; }
  say "daemon: round trip, idle memory, stream, READY with the stand-in harness (load $(cut -d' ' -f1-3 /proc/loadavg))"
  # The stand-in is the one built beside the bench (it says so by name when it is missing).
  local args=(--metaharness "$BIN/metaharness")
  [ -n "${MH_DAEMON_JSON:-}" ] && args+=(--json "$MH_DAEMON_JSON")
  local extra=()
  [ -n "${MH_DAEMON_BENCH_ARGS:-}" ] && read -r -a extra <<< "$MH_DAEMON_BENCH_ARGS"
  local out rc=0
  # Exit status 1: a goal is not met; 2: the bench itself failed (a run did not complete, the
  # daemon had to be killed, a stand-in outlived it).
  out="$("$program" "${args[@]}" "${extra[@]}")" || rc=$?
  printf '%s\n' "$out"
  case "$rc" in
    0) ;;
    1) say "daemon: a goal is not met (see above)"; return 1 ;;
    *) say "daemon: the bench did not complete (exit status $rc)"; return 1 ;;
  esac
}


# One vendor's row of mh_seam_bench: $1 vendor, $2 rounds, $3 summary file ("": the default).
# The programs metaharness launches beside it are built with it (mh-programs).
seam_bench_of() {
  local vendor="$1" runs="$2" json="$3" out
  local program="$BIN/mh_seam_bench"
  for needed in "$program" "$BIN/metaharness"; do
    [ -x "$needed" ] || { say "missing $needed (build first)"; return 1; }
  done
  say "$vendor seam: $runs interleaved rounds of 3 variants (load $(cut -d' ' -f1-3 /proc/loadavg))"
  local args=(--vendor "$vendor" --runs "$runs" --metaharness "$BIN/metaharness")
  [ -n "$json" ] && args+=(--json "$json")
  out="$("$program" "${args[@]}")" || { printf '%s\n' "$out"; say "$vendor seam: a variant did not complete"; return 1; }
  printf '%s\n' "$out"
}

# Every other vendor's call seam (issues 5 and 14): each row of mh_seam_bench but the default one
# (bench_seam's), one after the other: the real CLI against the scripted endpoint, 40 sequential
# shell calls per turn, its variants interleaved round-robin (the vendor with nothing asked, the
# floor; a bare driver answering every approval or permission at once; metaharness ask mode). A
# few minutes per vendor at the default 5 rounds; nothing else heavy should run meanwhile. No goal
# is judged: the added time per call is reported (unpaired and paired by round, with 95%
# bootstrap intervals). Environment, per vendor V (upper case): MH_<V>_SEAM_RUNS (measured rounds,
# default 5), MH_<V>_SEAM_JSON (summary file, default <v>-seam-bench.json in a fresh temporary
# directory, named in the output).
bench_vendor_seams() {
  local program="$BIN/mh_seam_bench" status=0
  [ -x "$program" ] || { say "missing $program (build first)"; return 1; }
  while read -r vendor mark; do
    [ "$mark" = default ] && continue
    local upper="${vendor^^}" runs_var json_var
    runs_var="MH_${upper}_SEAM_RUNS" json_var="MH_${upper}_SEAM_JSON"
    seam_bench_of "$vendor" "${!runs_var:-5}" "${!json_var:-}" || status=1
  done < <("$program" --list-vendors)
  return "$status"
}

# Starting a governed run per vendor (issue 14; mh_vendor_start_bench): every vendor of
# `metaharness vendor list` interleaved, spawn to session.started / turn.ended / stream.closed and the vendor's peak RSS.
# Environment: MH_VENDOR_START_RUNS (default 5).
bench_vendor_start() {
  local program="$BIN/mh_vendor_start_bench"
  [ -x "$program" ] || { say "missing $program (build first)"; return 1; }
  say "vendor start: ${MH_VENDOR_START_RUNS:-5} interleaved rounds of every vendor (load $(cut -d' ' -f1-3 /proc/loadavg))"
  "$program" --runs "${MH_VENDOR_START_RUNS:-5}" --metaharness "$BIN/metaharness"
}

# The run body (issue 11; mh_containment_bench): the end of a run with 500 unrelated processes on
# the host, the marker sweep against the run's cgroup, rounds interleaved; and the sandbox's added
# wall per run start and per exec inside it. About a minute. Environment: MH_CONTAINMENT_JSON
# (also write the summary there).
bench_containment() {
  local program="$BIN/mh_containment_bench"
  [ -x "$program" ] || { say "missing $program (build first)"; return 1; }
  say "containment: end of a run (marker sweep vs cgroup), sandbox start and exec (load $(cut -d' ' -f1-3 /proc/loadavg))"
  local args=()
  [ -n "${MH_CONTAINMENT_JSON:-}" ] && args+=(--json "$MH_CONTAINMENT_JSON")
  "$program" "${args[@]}"
}

# Runs that outlive the daemon (issue 11 item 5): mh_adoption_bench, N open stand-in runs (default
# 200) through a SIGKILL of the daemon and a restart, supervised (adopted) beside unsupervised
# (recovered). A few minutes and N supervisors + N stand-ins at the peak. Exit status 1: a run was
# not adopted, did not complete or left a process behind (a finding). Environment:
# MH_ADOPTION_BENCH_ARGS (extra arguments, e.g. "--runs 50"), MH_ADOPTION_JSON (summary file).
bench_adoption() {
  local program="$BIN/mh_adoption_bench" extra=() args=()
  [ -x "$program" ] || { say "missing $program (build first)"; return 1; }
  [ -n "${MH_ADOPTION_JSON:-}" ] && args+=(--json "$MH_ADOPTION_JSON")
  [ -n "${MH_ADOPTION_BENCH_ARGS:-}" ] && read -r -a extra <<< "$MH_ADOPTION_BENCH_ARGS"
  say "adoption: open runs through a SIGKILL and a restart (load $(cut -d' ' -f1-3 /proc/loadavg))"
  "$program" "${args[@]}" "${extra[@]}" || { say "adoption: exit status $? (see above)"; return 1; }
}

# The fleet (issue 13): mh_fleet_bench, a real 3-node nats-server cluster and three hosts' links:
# submit -> placed, an event line fleet-wide, a relayed decision beside a local one, placement
# runs/s. Under a minute. Environment: MH_FLEET_BENCH_ARGS (e.g. "--runs 300 --lines 2000").
bench_fleet() {
  local program="$BIN/mh_fleet_bench" extra=()
  [ -x "$program" ] || { say "missing $program (build first)"; return 1; }
  [ -n "${MH_FLEET_BENCH_ARGS:-}" ] && read -r -a extra <<< "$MH_FLEET_BENCH_ARGS"
  say "fleet: 3 hosts on a 3-node JetStream cluster (load $(cut -d' ' -f1-3 /proc/loadavg))"
  "$program" "${extra[@]}" || { say "fleet: exit status $? (see above)"; return 1; }
}

# The model gateway (issue 25): mh_gateway_bench, the same streamed request to the scripted endpoint
# directly and through a Gateway, interleaved, over http and https upstreams: added time to the
# first byte and to the whole answer (goal: p50 <= 1 ms added), and the gateway's CPU per request.
# Environment: MH_GATEWAY_BENCH_ARGS (e.g. "--requests 2000").
bench_gateway() {
  local program="$BIN/mh_gateway_bench" extra=()
  [ -x "$program" ] || { say "missing $program (build first)"; return 1; }
  [ -n "${MH_GATEWAY_BENCH_ARGS:-}" ] && read -r -a extra <<< "$MH_GATEWAY_BENCH_ARGS"
  say "gateway: added latency beside a direct connection (load $(cut -d' ' -f1-3 /proc/loadavg))"
  "$program" "${extra[@]}" || { say "gateway: exit status $? (see above)"; return 1; }
}

# Further benches: add a bench_<name> function above and list it here. MH_BENCH_ONLY (e.g.
# "bench_seam") runs only the named ones.
read -r -a BENCHES <<< "${MH_BENCH_ONLY:-bench_protocol bench_provenance bench_seam bench_daemon bench_vendor_seams bench_vendor_start bench_containment bench_adoption bench_fleet bench_gateway}"

status=0
for bench in "${BENCHES[@]}"; do
  "$bench" || status=1
done
exit "$status"
