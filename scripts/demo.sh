#!/usr/bin/env bash
# ./run demo: the main job end to end. Starts the daemon, submits a governed Claude Code run (the
# real CLI, pinned, against metaharness's scripted model endpoint) under a frame that admits no
# shell, tails it, and shows the denial at the seam and the vendor's own permission_denials. Then
# the same sealed frame governs a Codex run (codex app-server), an opencode run (its seam plugin), a
# Gemini CLI run (gemini --acp, on the Gemini wire) and a Qwen Code run (qwen --acp) in the same
# daemon, each against the scripted endpoint with a scenario of its own wire (scripts/demo/): the
# model tries the shell first, then reads README.txt and answers (Qwen Code, whose turn a denied
# call ends, in a second turn the demo injects); for each, the demo shows the denial at the seam
# (tool.decided), that the marker was never made, and that the stream is complete (check-stream).
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

# One more vendor under the same sealed frame, in the same daemon: submit, tail, the denial at the
# seam, no marker, a complete stream. $1 is the adapter, $2 what the demo calls it, $3 its scenario,
# $4 (optional) a message to inject: it is queued as the run's controller (attach) at once and
# reaches the model at the next turn boundary, for a vendor whose turn a denied call ends.
governed_by_the_same_frame() {
  local adapter="$1" name="$2" scenario="$3" inject="${4:-}" run
  say "the same frame on $name: submitting a governed $adapter run to the same daemon"
  run=$("$M" submit "$adapter" -p "Review README.txt; change nothing." --frame "$WORK/frame.json" \
          --model-scenario "$scenario" --cwd "$WORK/repo" --label demo=true)
  echo "run $run"
  if [ -n "$inject" ]; then
    # attach sends the command and follows the stream to stream.closed; its raw lines are kept.
    printf '{"format":"metaharness.command/1","id":"demo-inject","command":"message.inject","text":"%s"}\n' \
      "$inject" | "$M" attach "$run" > "$WORK/attach-$adapter.jsonl"
    "$M" tail --human "$run"
  else
    "$M" tail -f --human "$run"
  fi
  say "the denial at the seam on $name (tool.decided)"
  local decided
  decided=$("$M" tail --json "$run" | grep '"event":"tool.decided"')
  echo "$decided"
  if ! grep -q '"decision":"deny"' <<< "$decided"; then echo "no call was denied (this must not happen)"; exit 1; fi
  if [ -e /tmp/metaharness-demo-marker ]; then echo "YES: the marker exists (this must not happen)"; exit 1; fi
  echo "no marker: the $name call was refused before it ran too"
  "$M" check-stream "$WORK/state/runs/$run/events.jsonl"
}

governed_by_the_same_frame opencode opencode "$HERE/demo/scenario-opencode.json"
governed_by_the_same_frame gemini "Gemini CLI" "$HERE/demo/scenario-gemini.json"
# Qwen Code's read_file takes only absolute paths: its scenario names the repository by @REPO@.
# A call Qwen Code is told to cancel ends its turn, so the model's read comes in a second turn: the
# message the demo injects (the model reads Qwen's own "canceled" text with it).
sed "s|@REPO@|$WORK/repo|g" "$HERE/demo/scenario-qwen.json" > "$WORK/scenario-qwen.json"
governed_by_the_same_frame qwen "Qwen Code" "$WORK/scenario-qwen.json" \
  "The shell is not admitted in this step; read README.txt instead."

say "metaharness ls"
"$M" ls

say "stopping the daemon (SIGTERM)"
kill -TERM "$DAEMON"
wait "$DAEMON"
echo "daemon exited $?"
trap - EXIT
echo
echo "everything is kept in $WORK (daemon.log, state/runs/$RUN/)"
