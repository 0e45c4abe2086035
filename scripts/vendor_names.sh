#!/usr/bin/env bash
# Where each vendor's name appears outside its own folder (issue 26, section 3). The goal: outside
# adapters/<vendor>/, tests and docs, a vendor is named in one registration line
# (adapters/registry.cpp) and the pins file (vendor/pins). Prints, per vendor, the count and (with
# VERBOSE=1) the places; exits 0 (a measure, not a gate: ./run test does not fail on it).
#
#   scripts/vendor_names.sh [VENDOR ...]     (default: every folder of adapters/ that plans a vendor)
#   REV=<commit> scripts/vendor_names.sh     (count in that commit's tree instead of the work tree's)
#
# Counted: whole words, any case, in tracked text files. Not counted, and why:
#   - adapters/<vendor>/: the vendor's own folder;
#   - tests wherever they live (tests/, clients/python/tests/): the issue leaves tests out;
#   - docs, i.e. prose for users: docs/, README.md, bench/RESULTS.md (the measured figures, each
#     naming the CLI it measured), config/metaharness.toml (the documented example config, installed
#     as /usr/share/doc/metaharness/metaharness.toml.example; a test holds it to naming each
#     vendor's [vendor] key) and packaging/debian/control.in (the package's description);
#   - vendor/pins and this script.
# Also reported apart ("own files"): files named after the vendor outside its folder (its row of
# the seam bench, bench/seam/seam_<vendor>.cpp; its scenarios, bench/scenarios/<vendor>_*.json and
# scripts/demo/scenario-<vendor>.json). They are the vendor's own by their names, but they are
# outside adapters/<vendor>/, so the first figure counts them.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
REV="${REV:-}"

vendors=("$@")
if [ "${#vendors[@]}" -eq 0 ]; then
  if [ -n "$REV" ]; then
    dirs="$(git ls-tree -d --name-only "$REV" adapters/ | sed 's|^adapters/||')"
  else
    dirs="$(cd adapters && ls -d -- */ | tr -d /)"
  fi
  for name in $dirs; do
    # A vendor's folder has an adapter of its own; shared rooms (adapters/acp) do not.
    if git cat-file -e "${REV:-HEAD}:adapters/$name/${name}_adapter.cpp" 2>/dev/null ||
      [ -f "adapters/$name/${name}_adapter.cpp" ]; then vendors+=("$name"); fi
  done
fi

for vendor in "${vendors[@]}"; do
  rev_args=()
  [ -n "$REV" ] && rev_args=("$REV")
  places="$(git grep -n -i -w -I "$vendor" "${rev_args[@]}" -- . \
    ":(exclude)adapters/$vendor/" ':(exclude)tests/' ':(exclude)clients/python/tests/' ':(exclude)docs/' \
    ':(exclude)README.md' ':(exclude)bench/RESULTS.md' ':(exclude)config/metaharness.toml' \
    ':(exclude)packaging/debian/control.in' ':(exclude)vendor/pins' ':(exclude)scripts/vendor_names.sh' || true)"
  [ -n "$REV" ] && places="$(printf '%s\n' "$places" | sed "s|^$REV:||")"
  count=0 files=0 own=0
  if [ -n "$places" ]; then
    count="$(printf '%s\n' "$places" | wc -l)"
    files="$(printf '%s\n' "$places" | cut -d: -f1 | sort -u | wc -l)"
    own="$(printf '%s\n' "$places" | cut -d: -f1 | grep -c -E "(^|/|_|-)${vendor}([_.-])" || true)"
  fi
  echo "$vendor: $count lines in $files files outside adapters/$vendor/, tests and docs" \
    "($own of them in files named after it: its own bench rows and scenarios)"
  if [ -n "$places" ] && [ "${VERBOSE:-0}" = 1 ]; then printf '%s\n' "$places" | sed 's/^/  /' | cut -c1-160; fi
done
