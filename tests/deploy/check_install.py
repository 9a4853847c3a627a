#!/usr/bin/env python3
"""`make install` (cmake --install) installs the programs and the Python
package, and nothing else.

Installs the build into a temporary DESTDIR (nothing lands on the machine:
the Python package's destination is an absolute path, the system python3's
site directory, which --prefix would not move), then checks:

1. the programs in PREFIX/bin are exactly hypertuned, hypertune and, where
   the build made it, hypertune-train: no test or benchmark program;
2. every installed file is one of those programs or part of the Python
   package (no stray headers, libraries or build files);
3. the package is whole (its __init__.py, the generated stubs hypertune/v1
   and every subpackage of python/hypertune) and Debian's python3 imports
   it from there, stubs included;
4. each installed program runs from there (--help): the libraries it loads
   from outside the system's directories are still found.

Usage: check_install.py --build-dir BUILD --source-dir ROOT
           --python-dir DIR [--python PYTHON]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from package_checks import Failure, run

# The user-facing programs (docs/install.md, docs/cli.md, docs/sdk.md); the
# reference trainer is built only where its data and SDK are.
PROGRAMS = {"hypertuned", "hypertune"}
OPTIONAL_PROGRAMS = {"hypertune-train"}
IMPORT_CHECK = r"""
import json, sys
import hypertune
from hypertune.v1 import hypertune_pb2, hypertune_pb2_grpc
print(json.dumps({"hypertune": hypertune.__file__,
                  "stub": hypertune_pb2_grpc.__file__}))
"""


def subpackages(package_dir):
    """The package's folders with an __init__.py, relative to package_dir's
    parent (hypertune, hypertune/integration, ...)."""
    found = set()
    for root, dirs, files in os.walk(package_dir):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        if "__init__.py" in files:
            found.add(os.path.relpath(root, os.path.dirname(package_dir)))
    return found


def check(args, destdir):
    env = dict(os.environ, DESTDIR=destdir)
    run(["cmake", "--install", args.build_dir], "cmake --install", env=env)

    prefix = args.prefix.lstrip("/")
    site = args.python_dir.lstrip("/")
    bin_dir = os.path.join(destdir, prefix, "bin")
    package_dir = os.path.join(destdir, site, "hypertune")

    # 1. The programs.
    built = set(os.listdir(os.path.join(args.build_dir, "bin")))
    expected = PROGRAMS | (OPTIONAL_PROGRAMS & built)
    installed = set(os.listdir(bin_dir)) if os.path.isdir(bin_dir) else set()
    if installed != expected:
        extra = sorted(installed - expected)
        missing = sorted(expected - installed)
        raise Failure(f"{args.prefix}/bin holds {sorted(installed)}; expected "
                      f"exactly {sorted(expected)} (not expected: {extra}, "
                      f"missing: {missing})")
    print(f"ok: {args.prefix}/bin: {' '.join(sorted(installed))} "
          f"(of the {len(built)} programs in the build's bin)")

    # 2. Nothing else.
    for root, _, files in os.walk(destdir):
        for name in files:
            path = os.path.join(root, name)
            inside = os.path.relpath(path, destdir)
            if os.path.dirname(path) == bin_dir:
                continue
            if path.startswith(package_dir + os.sep):
                continue
            raise Failure(f"cmake --install installed /{inside}, which is "
                          "neither a program nor part of the Python package")

    # 3. The package, whole, and importable from where it was installed.
    source_package = os.path.join(args.source_dir, "python", "hypertune")
    wanted = {p for p in subpackages(source_package)
              if p != os.path.join("hypertune", "v1")}
    wanted.add(os.path.join("hypertune", "v1"))
    have = subpackages(package_dir)
    if not wanted <= have:
        raise Failure(f"the installed package in /{site} lacks "
                      f"{sorted(wanted - have)}")
    python_env = {k: v for k, v in os.environ.items()
                  if k not in ("PYTHONPATH", "PYTHONHOME")}
    python_env["PYTHONPATH"] = os.path.join(destdir, site)
    out = run([args.python, "-c", IMPORT_CHECK], "importing the installed package",
              cwd=destdir, env=python_env)
    imported = json.loads(out)
    for key, path in imported.items():
        if not os.path.realpath(path).startswith(os.path.realpath(package_dir)):
            raise Failure(f"{key} was imported from {path}, not from the installed "
                          f"package in {package_dir}")
    print(f"ok: /{site}/hypertune: {len(have)} packages, imported with its stubs")

    # 4. The installed programs run.
    for program in sorted(installed):
        run([os.path.join(bin_dir, program), "--help"],
            f"the installed {program} --help")
    print(f"ok: each installed program runs (--help)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--prefix", required=True,
                        help="the build's CMAKE_INSTALL_PREFIX")
    parser.add_argument("--python-dir", required=True,
                        help="where the build installs the Python package")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    args.build_dir = os.path.abspath(args.build_dir)
    args.source_dir = os.path.abspath(args.source_dir)
    with tempfile.TemporaryDirectory(prefix="hypertune-install-") as destdir:
        try:
            check(args, destdir)
        except Failure as failure:
            print(f"FAIL: {failure}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
