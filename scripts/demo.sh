#!/usr/bin/env bash
# ./run demo: the main job end to end. Starts the daemon, seals a frame that admits no shell, and
# governs a run of every vendor this build registers (`metaharness vendor list`) under that one
# frame in that one daemon: each the real pinned CLI against metaharness's scripted model
# endpoint, with the scenario in its own folder (adapters/<vendor>/demo/scenario.json, of its own
# wire): the model tries the shell first, then reads README.txt and answers. A vendor whose turn a
# denied call ends gets a second turn from a message the demo injects (adapters/<vendor>/demo/
# inject.txt). For each, the demo shows the denial at the seam (tool.decided), the vendor's own
# record of it where its session.ended carries one (permission_denials), that the marker was never
# made, and that the stream is complete (check-stream); it fails if any of that does not hold, or
# if a registered vendor has no demo scenario.
set -euo pipefail

BIN="$1"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
M="$BIN/metaharness"
WORK="$(mktemp -d /tmp/metaharness-demo.XXXXXX)"
SOCKET="$WORK/metaharness.sock"
export METAHARNESS_SOCKET="$SOCKET"
rm -f /tmp/metaharness-demo-marker

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "metaharness doctor, for every vendor of metaharness vendor list (the installed CLIs against the pins)"
for vendor in $("$M" vendor list); do
  "$M" doctor "$vendor"
done

say "starting the daemon (state in $WORK/state)"
"$M" daemon --socket "$SOCKET" --state-dir "$WORK/state" 2> "$WORK/daemon.log" &
DAEMON=$!
trap 'kill "$DAEMON" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do [ -S "$SOCKET" ] && break; sleep 0.1; done
"$M" status --json

say "sealing the frame: it admits file.read, search, dir.list, and no shell"
"$M" frame seal "$HERE/demo/frame.json" "$WORK/frame.json"
"$M" frame verify "$WORK/frame.json"

mkdir -p "$WORK/repo"
printf 'metaharness demo repository\n' > "$WORK/repo/README.txt"

# One vendor under the sealed frame, in the daemon: submit, tail, the denial at the seam, the
# vendor's own record of it where it keeps one, no marker, a complete stream. $1 is the adapter,
# $2 how the demo introduces the run. A scenario names the repository by @REPO@ where its CLI
# takes only absolute paths. With inject.txt, its text is queued as the run's controller (attach)
# at once and reaches the model at the next turn boundary, for a vendor whose turn a denied call
# ends.
governed_by_the_frame() {
  local adapter="$1" intro="$2" dir="$ROOT/adapters/$1/demo" run
  if [ ! -f "$dir/scenario.json" ]; then
    echo "no demo scenario for $adapter: $dir/scenario.json is missing (every registered vendor has one)"
    exit 1
  fi
  sed "s|@REPO@|$WORK/repo|g" "$dir/scenario.json" > "$WORK/scenario-$adapter.json"
  say "$intro"
  run=$("$M" submit "$adapter" -p "Review README.txt; change nothing." --frame "$WORK/frame.json" \
          --model-scenario "$WORK/scenario-$adapter.json" --cwd "$WORK/repo" --label demo=true)
  echo "run $run"
  if [ -f "$dir/inject.txt" ]; then
    # attach sends the command and follows the stream to stream.closed; its raw lines are kept.
    python3 -c 'import json, sys; print(json.dumps({"format": "metaharness.command/1", "id": "demo-inject",
      "command": "message.inject", "text": open(sys.argv[1]).read().strip()}))' "$dir/inject.txt" |
      "$M" attach "$run" > "$WORK/attach-$adapter.jsonl"
    "$M" tail --human "$run"
  else
    "$M" tail -f --human "$run"
  fi
  say "the denial at the seam on $adapter (tool.decided)"
  local decided
  decided=$("$M" tail --json "$run" | grep '"event":"tool.decided"')
  echo "$decided"
  if ! grep -q '"decision":"deny"' <<< "$decided"; then echo "no call was denied (this must not happen)"; exit 1; fi
  local denials
  denials=$("$M" tail --json "$run" | grep '"event":"session.ended"' | grep -o '"permission_denials":\[[^]]*\]' || true)
  if [ -n "$denials" ]; then
    say "the vendor's own record of the denial, passed through on session.ended"
    echo "$denials"
  fi
  if [ -e /tmp/metaharness-demo-marker ]; then echo "YES: the marker exists (this must not happen)"; exit 1; fi
  echo "no marker: /tmp/metaharness-demo-marker does not exist; the $adapter call was refused before it ran"
  "$M" check-stream "$WORK/state/runs/$run/events.jsonl"
  RUNS+=("$run")
}

RUNS=()
first=1
for vendor in $("$M" vendor list); do
  if [ "$first" = 1 ]; then
    governed_by_the_frame "$vendor" "submitting a governed $vendor run on a checkout in $WORK/repo"
    first=0
  else
    governed_by_the_frame "$vendor" "the same frame on $vendor: submitting a governed $vendor run to the same daemon"
  fi
done

say "metaharness ls"
"$M" ls

say "stopping the daemon (SIGTERM)"
kill -TERM "$DAEMON"
wait "$DAEMON"
echo "daemon exited $?"
trap - EXIT
echo
echo "everything is kept in $WORK (daemon.log, and state/runs/<run>/ of each run: ${RUNS[*]})"
