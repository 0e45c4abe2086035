#!/usr/bin/env bash
# The C++ sources against .clang-format (clang-format 14, installed by ./run setup).
#   scripts/format.sh          rewrites every tracked .cpp/.hpp in place (./run format)
#   scripts/format.sh --check  changes nothing; lists the files that differ and exits 1 if any
#                              (a ctest test runs this, so a misformatted file fails ./run test)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FORMAT="$(command -v clang-format-14 || command -v clang-format || true)"
[ -n "$FORMAT" ] || { echo "format: clang-format-14 is not installed (./run setup installs it)" >&2; exit 2; }

cd "$ROOT"
mapfile -t files < <(git ls-files '*.cpp' '*.hpp')
if [ "${1:-}" = "--check" ]; then
  # One clang-format for every file; it names each line that differs as "file:line:col: error".
  mapfile -t bad < <("$FORMAT" --dry-run -Werror "${files[@]}" 2>&1 | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error:.*/\1/p' | sort -u)
  if [ "${#bad[@]}" -gt 0 ]; then
    printf 'format: %s differs from .clang-format\n' "${bad[@]}" >&2
    echo "format: run ./run format (or scripts/format.sh) and commit the result" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files follow .clang-format"
else
  "$FORMAT" -i "${files[@]}"
fi
