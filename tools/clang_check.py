#!/usr/bin/python3
"""Compiles the project's own C++ sources with clang++ -fsyntax-only and extra
warnings as errors (by default -Wthread-safety: the ABSL_GUARDED_BY /
ABSL_EXCLUSIVE_LOCKS_REQUIRED annotations, which g++ ignores), in parallel,
from the compile commands of a configured Ninja build.

  tools/clang_check.py [--build build] [--jobs N] [--clang clang++]
                       [--flag -Wthread-safety ...] [--all] [--list]
                       [FILE_SUBSTRING ...]

The build's own commands are used (ninja -t compdb), so the include paths,
definitions and generated headers are the build's; what only GCC knows is
dropped (the precompiled header's -include, -Winvalid-pch), and so are the
outputs (-o, -MD/-MF/-MT). Generated sources (under the build folder) are
left out. Prints each failing file's diagnostics and a one-line summary;
exits 1 when a file fails, 2 when the build has no compile commands.

With the default flag, only the translation units that can hold a finding
are compiled: those whose source, or a project header it includes (followed
through the project's own headers), names a lock or a thread-safety
annotation (LOCK_PATTERN). The analysis is per function and needs an
annotated declaration in sight, so the others cannot fail it; --all
compiles every one (clang's other -Wall -Wextra findings included), about
three times as long.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import time

# GCC options that clang does not know or that name GCC's outputs.
DROP = {"-Winvalid-pch", "-MD", "-MMD"}
DROP_WITH_VALUE = {"-include", "-o", "-MF", "-MT", "-MQ"}
# -Wall -Wextra stay as the build has them; these are on top.
DEFAULT_FLAGS = ["-Wthread-safety"]
# What a source or header names when clang's thread-safety analysis has
# something to check in it: Abseil's mutex (its declarations are annotated)
# or an annotation of the project's own.
LOCK_PATTERN = re.compile(
    r"absl/synchronization/|absl::Mutex|\bMutexLock\b|"
    r"ABSL_[A-Z_]*(GUARDED|LOCK|CAPABILITY|ACQUIRE|RELEASE)[A-Z_]*\(")
QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


class LockUsers:
    """Whether a file, or a project header it includes, matches
    LOCK_PATTERN; quoted includes are looked up next to the file, then in
    the project's include folders (`roots`)."""

    def __init__(self, roots):
        self.roots = roots
        self.files = {}  # path -> (matches, the paths it includes)

    def _read(self, path):
        if path not in self.files:
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
            except OSError:
                text = ""
            included = []
            for name in QUOTED_INCLUDE.findall(text):
                for base in [os.path.dirname(path)] + self.roots:
                    candidate = os.path.join(base, name)
                    if os.path.isfile(candidate):
                        included.append(os.path.realpath(candidate))
                        break
            self.files[path] = (bool(LOCK_PATTERN.search(text)), included)
        return self.files[path]

    def __call__(self, path):
        seen, todo = {path}, [path]
        while todo:
            matches, included = self._read(todo.pop())
            if matches:
                return True
            for header in included:
                if header not in seen:
                    seen.add(header)
                    todo.append(header)
        return False


def compile_commands(build):
    out = subprocess.run(["ninja", "-C", build, "-t", "compdb"], check=True,
                         capture_output=True, text=True).stdout
    build_dir = os.path.realpath(build)
    commands = []
    for entry in json.loads(out):
        command = entry.get("command", "")
        path = os.path.join(entry["directory"], entry["file"])
        path = os.path.realpath(path)
        if not path.endswith((".cc", ".cpp")) or not command:
            continue
        if path.startswith(build_dir + os.sep):
            continue  # generated (protobuf, gRPC)
        commands.append((path, entry["directory"], shlex.split(command)))
    return commands


def clang_command(args, clang, flags):
    result = [clang]
    skip = False
    for arg in args[1:]:
        if skip:
            skip = False
            continue
        if arg in DROP:
            continue
        if arg in DROP_WITH_VALUE:
            skip = True
            continue
        if arg == "-c":
            result.append("-fsyntax-only")
            continue
        result.append(arg)
    return result + flags


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--clang", default="clang++")
    parser.add_argument("--flag", action="append", dest="flags",
                        help="a warning to add (default -Wthread-safety); "
                             "-Werror is always added")
    parser.add_argument("--all", action="store_true",
                        help="compile every translation unit, not only "
                             "those that name a lock (the default with "
                             "-Wthread-safety alone)")
    parser.add_argument("--list", action="store_true",
                        help="print the files that would be compiled")
    parser.add_argument("only", nargs="*",
                        help="check only the files whose path contains one")
    args = parser.parse_args()
    flags = (args.flags or DEFAULT_FLAGS) + ["-Werror"]
    # De-duplicated: a source compiled into two targets (a portable copy)
    # is checked under each target's flags, which may differ.
    units = sorted({(p, d, tuple(clang_command(c, args.clang, flags)))
                    for p, d, c in compile_commands(args.build)})
    if not units:
        print(f"clang_check: no C++ compile commands in {args.build}/",
              file=sys.stderr)
        return 2
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    total = len(units)
    if args.only:
        units = [u for u in units if any(s in u[0] for s in args.only)]
    elif not args.all and not args.flags:
        uses_locks = LockUsers([root, os.path.join(os.path.realpath(
            args.build), "proto")])
        units = [u for u in units if uses_locks(u[0])]
    if args.list:
        for path in sorted({u[0] for u in units}):
            print(os.path.relpath(path, root))
        print(f"clang_check: {len(units)} of {total} translation units")
        return 0
    start = time.monotonic()

    def check(unit):
        path, directory, command = unit
        run = subprocess.run(list(command), cwd=directory,
                             capture_output=True, text=True)
        return path, run.returncode, run.stdout + run.stderr

    failed = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for path, code, output in pool.map(check, units):
            if code != 0:
                failed.append(os.path.relpath(path, root))
                sys.stdout.write(output)
                sys.stdout.flush()
    seconds = time.monotonic() - start
    what = " ".join(flags)
    checked = (f"{len(units)} translation units"
               + ("" if len(units) == total else f" (of {total})"))
    if failed:
        print(f"clang_check: {len(failed)} of {checked} fail {args.clang} "
              f"{what} ({seconds:.0f} s): " + " ".join(sorted(set(failed))))
        return 1
    print(f"clang_check: {checked} pass {args.clang} {what} "
          f"({seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
