#!/usr/bin/env python3
"""Checks the command lines of README.md and docs/*.md against the programs.

Every line of a ```sh block, and every inline `code span`, that runs
hypertuned, hypertune or hypertune-train (by name or by a path ending in it:
build/bin/hypertuned) is checked as check_deploy.py checks deploy/'s: each
flag is one the program's --help lists, in a place the program takes it,
with its value; each `hypertune` command is one `hypertune --help` lists.
The shell around a command is cut off first (`&`, `&&`, `|`, `;`,
redirections), and the usage notation of the docs is read as such: an
optional `[--flag VALUE]` is checked as the flag, an upper-case placeholder
(NAME, FILE) stands for a positional argument, `hypertune ... COMMAND` and
`hypertune --flag ...` have only their global flags checked, and a flag
named at the end of an inline span may go without its value.

With --links, the relative links of the same pages are checked instead: each
names a file of the repository, and each #anchor a heading of its page.

With --break FILE OLD NEW --expect-error TEXT, a copy of the pages with
FILE's first OLD replaced by NEW is checked, and the check passes only if it
fails with an error containing TEXT (the test of the test).

Usage:
  check_docs.py --root DIR --hypertuned BIN --hypertune BIN
                --hypertune-train BIN [--break FILE OLD NEW --expect-error TEXT]
  check_docs.py --root DIR --links
"""

import argparse
import glob
import os
import re
import shlex
import shutil
import sys
import tempfile

# check_deploy.py, beside this file, knows the programs' flags.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_deploy import PROGRAMS, Invocation, Programs, Report, check_invocation  # noqa: E402

SHELL_OPERATORS = {"&", "&&", "|", "||", ";", ">", ">>", "<", "2>", "2>&1", "&>"}
# A placeholder of the docs' usage lines, where a real line has a name.
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(\.\.\.)?$")


def pages(root):
    """README.md and docs/*.md, as (path, text)."""
    paths = [os.path.join(root, "README.md")] + sorted(
        glob.glob(os.path.join(root, "docs", "*.md")))
    for path in paths:
        with open(path, encoding="utf-8") as f:
            yield path, f.read()


def command_lines(text):
    """(kind, line) for each line of the ```sh blocks and each inline span
    outside fenced blocks."""
    for block in re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            yield "sh", line
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    for span in re.findall(r"`([^`\n]+)`", prose.replace("\n", " ")):
        yield "inline", span


def argv_of(line, kind):
    """The argv of the command a line runs, or None when it runs none of the
    programs. Raises ValueError for a line shlex cannot read."""
    words = shlex.split(line, comments=(kind == "sh"))
    # Usage notation: `[--flag VALUE]` and `[--flag]` are checked as flags.
    words = [w.strip("[]") if w.startswith("[") or w.endswith("]") else w for w in words]
    words = [w for w in words if w]
    for i, word in enumerate(words):
        if word in SHELL_OPERATORS:
            words = words[:i]
            break
    if not words or os.path.basename(words[0]) not in PROGRAMS:
        return None
    if kind == "inline" and len(words) == 1:
        return None  # the program's name alone, in a sentence
    return [os.path.basename(words[0])] + words[1:]


def check_commands(root, programs, report):
    commands = programs.cli_commands()
    for path, text in pages(root):
        where = os.path.relpath(path, root)
        for kind, line in command_lines(text):
            try:
                argv = argv_of(line, kind)
            except ValueError as e:
                if kind == "sh":
                    report.error(where, f"{line!r}: {e}")
                continue
            if argv is None:
                continue
            first_words = {path[0] for path in commands}
            if argv[-1] == "...":
                argv = argv[:-1]  # more arguments, elided
                if argv[0] == "hypertune" and not first_words & set(argv[1:]):
                    # `hypertune --server a,b ...`: only the global flags
                    # are shown; any command takes them.
                    argv = argv + ["study", "list"]
            if argv[0] == "hypertune" and "COMMAND" in argv:
                # The general usage, `hypertune [--server HOST] COMMAND`.
                argv = argv[:argv.index("COMMAND")] + ["study", "list"]
            if kind == "inline" and argv[-1].startswith("--"):
                # A flag named in a sentence (`hypertuned --backup-dir`): its
                # value may be left out.
                with_value = Report()
                check_invocation(Invocation(where, argv + ["VALUE"]), programs, with_value)
                if not with_value.errors:
                    argv = argv + ["VALUE"]
            check_invocation(Invocation(f"{where}: {kind}", argv), programs, report)


def heading_anchors(text):
    """GitHub's anchors for the headings of a page."""
    anchors = set()
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    for heading in re.findall(r"^#+ (.+)$", prose, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


def check_links(root, report):
    texts = dict(pages(root))
    for path, text in texts.items():
        where = os.path.relpath(path, root)
        prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file_part, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                if file_part else path
            if not os.path.exists(resolved):
                report.error(where, f"link {target}: no file {os.path.relpath(resolved, root)}")
                continue
            report.checked.append(f"{where}: {target}")
            if anchor and resolved.endswith(".md"):
                with open(resolved, encoding="utf-8") as f:
                    if anchor not in heading_anchors(f.read()):
                        report.error(where, f"link {target}: {os.path.relpath(resolved, root)} "
                                            f"has no heading #{anchor}")


def broken_copy(root, tmp, breakage):
    """A copy of root's pages in tmp with the breakage applied; its root."""
    file, old, new = breakage
    copy = os.path.join(tmp, "root")
    os.makedirs(copy)
    shutil.copy(os.path.join(root, "README.md"), copy)
    shutil.copytree(os.path.join(root, "docs"), os.path.join(copy, "docs"))
    target = os.path.join(copy, file)
    with open(target, encoding="utf-8") as f:
        text = f.read()
    if old not in text:
        raise SystemExit(f"FAIL: {file} no longer holds {old!r}: update this test's --break")
    with open(target, "w", encoding="utf-8") as f:
        f.write(text.replace(old, new, 1))
    print(f"{file}: {old!r} -> {new!r}")
    return copy


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--hypertuned")
    parser.add_argument("--hypertune")
    parser.add_argument("--hypertune-train")
    parser.add_argument("--links", action="store_true")
    parser.add_argument("--break", dest="breakage", nargs=3, metavar=("FILE", "OLD", "NEW"))
    parser.add_argument("--expect-error", metavar="TEXT")
    args = parser.parse_args()
    if (args.breakage is None) != (args.expect_error is None):
        parser.error("--break and --expect-error go together")
    with tempfile.TemporaryDirectory() as tmp:
        root = broken_copy(args.root, tmp, args.breakage) if args.breakage else args.root
        report, what = run_checks(parser, args, root)
    if args.expect_error is not None:
        for line in report.errors:
            print(f"error (expected here): {line}")
        if any(args.expect_error in line for line in report.errors):
            print(f"ok: the check fails as it should ({args.expect_error!r})")
            return 0
        print(f"FAIL: no error containing {args.expect_error!r}")
        return 1
    for line in report.checked:
        print(f"checked  {line}")
    for line in report.errors:
        print(f"ERROR    {line}")
    print(f"docs: {len(report.checked)} {what} checked, {len(report.errors)} errors")
    return 1 if report.errors else 0


def run_checks(parser, args, root):
    """Runs the checks args ask for on the pages under root: (report, what)."""
    report = Report()
    if args.links:
        check_links(root, report)
        what = "links"
    else:
        if not (args.hypertuned and args.hypertune and args.hypertune_train):
            parser.error("--hypertuned, --hypertune and --hypertune-train are needed "
                         "(or --links)")
        programs = Programs({"hypertuned": args.hypertuned, "hypertune": args.hypertune,
                             "hypertune-train": args.hypertune_train})
        check_commands(root, programs, report)
        what = "command lines"
        for planned, where, use in report.planned:
            # Every feature the docs describe is built: a planned use is an error.
            report.error(where, f"{use}: {planned.what} is not in these programs")
    if not report.checked:
        report.error(root, f"no {what} found in README.md and docs/*.md")
    return report, what


if __name__ == "__main__":
    sys.exit(main())
