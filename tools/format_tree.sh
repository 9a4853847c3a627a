#!/usr/bin/env bash
# Formats every C++ source of the project (tools/cxx_sources.sh) in place
# with clang-format and the root .clang-format, so that `make format-check`
# passes; then prints what it changed (git diff --shortstat). Run from a
# clean tree, so that the formatting is a commit of its own.
#
#   tools/format_tree.sh [CLANG_FORMAT]   (default: clang-format)
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=${1:-clang-format}
if ! command -v "$clang_format" >/dev/null 2>&1; then
  echo "format_tree: $clang_format not found (apt-get install clang-format)" >&2
  exit 1
fi
tools/cxx_sources.sh | xargs -d '\n' -P "$(nproc)" -n 20 "$clang_format" -i --style=file
echo "format_tree: $(tools/cxx_sources.sh | wc -l) files formatted with" \
  "$("$clang_format" --version | sed 's/.*version \([0-9.]*\).*/clang-format \1/')"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git diff --shortstat -- $(tools/cxx_sources.sh) || true
fi
