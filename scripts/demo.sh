#!/usr/bin/env bash
# ./run demo: the main job end to end. Starts the daemon, submits a governed Claude Code run (the
# real CLI, pinned, against metaharness's scripted model endpoint) under a frame that admits no
# shell, tails it, and shows the denial at the seam and the vendor's own permission_denials. Then
# the same frame governs a Codex run (codex app-server) in the same daemon: the same events.
set -euo pipefail

BIN="$1"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
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

say "submitting a governed Claude Code run on a checkout in $WORK/repo"
mkdir -p "$WORK/repo"
printf 'metaharness demo repository\n' > "$WORK/repo/README.txt"
RUN=$("$M" submit claude -p "Review README.txt; change nothing." --frame "$WORK/frame.json" \
        --model-scenario "$HERE/demo/scenario.json" --cwd "$WORK/repo" --label demo=true)
echo "run $RUN"

say "metaharness tail -f $RUN"
"$M" tail -f --human "$RUN"

say "the denial at the seam (tool.decided)"
"$M" tail --json "$RUN" | grep '"event":"tool.decided"'

say "the vendor's own permission_denials, passed through on session.ended"
"$M" tail --json "$RUN" | grep '"event":"session.ended"' | grep -o '"permission_denials":\[[^]]*\]'

say "did the shell command run?"
if [ -e /tmp/metaharness-demo-marker ]; then echo "YES: the marker exists (this must not happen)"; exit 1; fi
echo "no: /tmp/metaharness-demo-marker does not exist; the call was refused before it ran"

say "the stream is complete"
"$M" check-stream "$WORK/state/runs/$RUN/events.jsonl"

say "the same frame on Codex: submitting a governed codex run (app-server) to the same daemon"
RUN2=$("$M" submit codex -p "Review README.txt; change nothing." --frame "$WORK/frame.json" \
        --model-scenario "$HERE/demo/scenario-codex.json" --cwd "$WORK/repo" --label demo=true)
echo "run $RUN2"
"$M" tail -f --human "$RUN2"

say "the denial at the seam, this time an approval declined in-band (tool.decided)"
"$M" tail --json "$RUN2" | grep '"event":"tool.decided"'
if [ -e /tmp/metaharness-demo-marker ]; then echo "YES: the marker exists (this must not happen)"; exit 1; fi
echo "no marker: the codex call was refused before it ran too"
"$M" check-stream "$WORK/state/runs/$RUN2/events.jsonl"

say "metaharness ls"
"$M" ls

say "stopping the daemon (SIGTERM)"
kill -TERM "$DAEMON"
wait "$DAEMON"
echo "daemon exited $?"
trap - EXIT
echo
echo "everything is kept in $WORK (daemon.log, state/runs/$RUN/)"
