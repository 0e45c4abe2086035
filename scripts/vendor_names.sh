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
# Reported apart, and included in the first figure, by what the line is:
#   - own files: files named after the vendor outside its folder (its row of the seam bench,
#     bench/seam/seam_<vendor>.cpp; its seam scenario, bench/scenarios/<vendor>_*.json);
#   - the wire: where the vendor's id is also the name of a model API the vendor speaks (the
#     Gemini API's wire is "gemini"), lines in the folders that speak the model wires by name
#     (daemon/model/, daemon/gateway/, daemon/config/, daemon/supervisor/) name the wire, not the
#     vendor;
#   - a model's id: the name begins a model's id (claude-sonnet-4-5, the model two other vendors'
#     runs ask for by default): it names Anthropic's model, not the Claude Code adapter;
#   - a file's name another CLI reads: in another vendor's folder, `<NAME>.md` (CLAUDE.md, a rules
#     file opencode reads too, and that another vendor's plan keeps out of its run): it names a
#     file of that CLI's, not this adapter;
#   - comments: the name is in a comment (a line that is one, or after `//` or `# `, or a Python
#     docstring's line): a vendor cited as the reason for, or an example of, vendor-neutral code;
#   - the wire, also: a scenario's "wires" list (bench/scenarios/), which names the model APIs the
#     scripted endpoint answers on;
#   - code: every other line; the goal is one, its registration line.
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
    # A vendor's folder has a descriptor of its own; shared rooms (adapters/acp) do not.
    if git cat-file -e "${REV:-HEAD}:adapters/$name/${name}_descriptor.cpp" 2>/dev/null ||
      [ -f "adapters/$name/${name}_descriptor.cpp" ]; then vendors+=("$name"); fi
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
  count=0 files=0 own=0 wire=0 model=0 file=0 comments=0 code=0 tagged=""
  if [ -n "$places" ]; then
    count="$(printf '%s\n' "$places" | wc -l)"
    files="$(printf '%s\n' "$places" | cut -d: -f1 | sort -u | wc -l)"
    tagged="$(printf '%s\n' "$places" | VENDOR="$vendor" python3 -c '
import ast, os, re, subprocess, sys
vendor = os.environ["VENDOR"]
rev = os.environ.get("REV", "")
wires = ("anthropic", "openai-responses", "gemini")  # the model wires, by their config names
wire_dirs = ("daemon/model/", "daemon/gateway/", "daemon/config/", "daemon/supervisor/")
name = re.compile(r"(?i)(?<![\w])" + re.escape(vendor) + r"(?![\w])")
# A model id that begins with the vendor name (claude-sonnet-4-5, a model of Anthropic, which
# runs of other vendors ask for too) names the model, not the vendor.
model_id = re.compile(r"(?i)(?<![\w])" + re.escape(vendor) + r"-(sonnet|opus|haiku)[\w.-]*")
docstring_lines = {}
def in_docstring(path, number):
    """A Python docstring is documentation: the lines of every string that is a statement of its own."""
    if path not in docstring_lines:
        spans = set()
        try:
            source = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True, check=True).stdout \
                if rev else open(path, encoding="utf-8").read()
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                    spans.update(range(node.lineno, node.end_lineno + 1))
        except (OSError, SyntaxError, subprocess.CalledProcessError):
            pass
        docstring_lines[path] = spans
    return number in docstring_lines[path]
for line in sys.stdin.read().splitlines():
    path, number, text = line.split(":", 2)
    match = name.search(text)
    before = text[:match.start()] if match else ""
    if re.search(r"(^|/|_|-)" + re.escape(vendor) + r"([_.-])", path):
        kind = "own"
    elif vendor in wires and (path.startswith(wire_dirs) or (path.startswith("bench/scenarios/") and "\"wires\"" in text)):
        kind = "wire"
    elif text.lstrip().startswith(("//", "#", "*", "/*")) or "//" in before or re.search(r"(^|\s)# ", before) \
            or (path.endswith(".py") and in_docstring(path, int(number))):
        kind = "comment"
    elif not name.search(model_id.sub("", text)):
        kind = "model"
    elif path.startswith("adapters/") and not name.search(
            re.sub(r"(?i)(?<![\w])" + re.escape(vendor) + r"\.md(?![\w])", "", text)):
        kind = "file"
    else:
        kind = "code"
    print(kind, line)
')"
    own="$(grep -c '^own ' <<< "$tagged" || true)"
    wire="$(grep -c '^wire ' <<< "$tagged" || true)"
    model="$(grep -c '^model ' <<< "$tagged" || true)"
    file="$(grep -c '^file ' <<< "$tagged" || true)"
    comments="$(grep -c '^comment ' <<< "$tagged" || true)"
    code="$(grep -c '^code ' <<< "$tagged" || true)"
  fi
  echo "$vendor: $count lines in $files files outside adapters/$vendor/, tests and docs:" \
    "$code code, $comments in comments, $wire naming its model wire, $model in a model's id," \
    "$file in a file name another CLI reads, $own in files named after it"
  if [ -n "$tagged" ] && [ "${VERBOSE:-0}" = 1 ]; then printf '%s\n' "$tagged" | sed 's/^/  /' | cut -c1-170; fi
done
