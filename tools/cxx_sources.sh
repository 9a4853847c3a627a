#!/usr/bin/env bash
# Prints the project's own C++ sources (.cc .h .cu .cuh .cpp .hpp), one per
# line, relative to the repository root: those git tracks or would track
# (new files too, ignored ones not: build folders, generated code), or,
# outside a git checkout, those found outside build*/ folders.
set -euo pipefail
cd "$(dirname "$0")/.."
patterns=('*.cc' '*.h' '*.cu' '*.cuh' '*.cpp' '*.hpp')
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # Deleted but not yet committed files are listed by git and absent here.
  git ls-files --cached --others --exclude-standard -- "${patterns[@]}" |
    while IFS= read -r f; do [[ -f $f ]] && printf '%s\n' "$f"; done | sort -u
else
  find . \( -path './build*' -o -path './.git' -o -name node_modules \) -prune -o \
    -type f \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
    -o -name '*.cpp' -o -name '*.hpp' \) -print | sed 's|^\./||' | sort
fi
