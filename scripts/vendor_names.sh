#!/usr/bin/env bash
# Where each vendor's name appears outside its own folder (issue 26, section 3): the goal is that,
# outside adapters/<vendor>/, tests/ and docs/, a vendor is named in one registration line and the
# pins file (vendor/pins). Prints, per vendor, the count and the places; exits 0 (a measure, not a
# gate: ./run test does not fail on it).
#
#   scripts/vendor_names.sh [VENDOR ...]     (default: every folder of adapters/ that plans a vendor)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

vendors=("$@")
if [ "${#vendors[@]}" -eq 0 ]; then
  for dir in adapters/*/; do
    name="$(basename "$dir")"
    # A vendor's folder has an adapter of its own; shared rooms (adapters/acp) do not.
    if compgen -G "adapters/$name/${name}_adapter.cpp" >/dev/null; then vendors+=("$name"); fi
  done
fi

for vendor in "${vendors[@]}"; do
  # Whole words, any case, in tracked files outside the vendor's folder, tests, docs, the pins
  # file and this script; README and other prose files count (they are not docs/).
  places="$(git grep -n -i -w -I "$vendor" -- . \
    ":(exclude)adapters/$vendor/" ':(exclude)tests/' ':(exclude)docs/' ':(exclude)vendor/pins' \
    ':(exclude)scripts/vendor_names.sh' || true)"
  count=0
  [ -n "$places" ] && count="$(printf '%s\n' "$places" | wc -l)"
  files=0
  [ -n "$places" ] && files="$(printf '%s\n' "$places" | cut -d: -f1 | sort -u | wc -l)"
  echo "$vendor: $count lines in $files files outside adapters/$vendor/, tests/, docs/ and vendor/pins"
  if [ -n "$places" ] && [ "${VERBOSE:-0}" = 1 ]; then printf '%s\n' "$places" | sed 's/^/  /' | cut -c1-160; fi
done
