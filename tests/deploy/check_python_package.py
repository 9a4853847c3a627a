#!/usr/bin/env python3
"""Builds the pure-Python package from the source tree and uses it.

The install route without the C++ build (docs/install.md): python/setup.py
generates the gRPC stubs from proto/hypertune.proto while the package is
built. This check, with the standard library and Debian's python3-venv and
python3-pip only, and no network:

1. copies python/ and proto/ into a temporary folder (so the build's
   python/build and egg-info never land in the source tree), makes a venv
   with the system site packages (Debian's grpcio and protobuf) and runs
   `pip install --no-build-isolation --no-index` on the copy of python/;
2. imports hypertune from the venv, never from the source tree or
   PYTHONPATH, with its generated stubs and every subpackage that
   python/hypertune has (hypertune.integration, ...);
3. builds a source distribution and installs it where no proto/ is beside
   it, as `python3 -m build` does: the sdist must carry the proto; and where
   python3-build is installed, runs `python3 -m build` and installs its
   wheel;
4. with --hypertuned, starts it and creates a study with the installed
   package.

Exits 77 (ctest: skipped, with the reason) where python3 lacks venv or pip,
or no generator of the stubs is installed.

Usage: check_python_package.py --source-dir ROOT [--hypertuned BIN]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

from package_checks import Failure, run, start_server

SKIP = 77
IMPORT_CHECK = r"""
import importlib, json, sys
import hypertune
from hypertune.v1 import hypertune_pb2, hypertune_pb2_grpc
found = {}
for name in json.loads(sys.argv[1]):
    module = importlib.import_module(name)
    found[name] = module.__file__
print(json.dumps({"hypertune": hypertune.__file__,
                  "stub": hypertune_pb2_grpc.__file__,
                  "service": sorted(hypertune_pb2.DESCRIPTOR.services_by_name),
                  "subpackages": found}))
"""
STUDY_CHECK = r"""
import sys
import hypertune
client = hypertune.Client(sys.argv[1])
study = client.create_study({"name": "package-check", "spec": {
    "parameters": [{"name": "x", "double_spec": {"min": 0, "max": 1}}],
    "metrics": [{"name": "loss", "goal": "MINIMIZE"}], "max_trials": 2}})
trial = study.ask()
trial.complete(loss=trial.params["x"])
print(study.name, [t.state for t in study.trials()])
"""




def subpackages(package_dir):
    """The dotted names of hypertune's subpackages in the source tree, the
    generated stubs (hypertune/v1, a git-ignored copy there) left out."""
    names = []
    for root, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__"
                         and not (root == package_dir and d == "v1"))
        if root != package_dir and "__init__.py" in files:
            relative = os.path.relpath(root, os.path.dirname(package_dir))
            names.append(relative.replace(os.sep, "."))
    return names


def clean_env():
    """The environment for the venv's python: nothing from the source tree."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PIP_FIND_LINKS")}
    env["PIP_NO_INDEX"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def check_import(python, venv, expected, env, where):
    """Imports the installed package; checks it comes from the venv."""
    out = run([python, "-c", IMPORT_CHECK, json.dumps(expected)],
              f"importing the package installed {where}", cwd=venv, env=env)
    result = json.loads(out)
    for key in ("hypertune", "stub"):
        if not os.path.realpath(result[key]).startswith(os.path.realpath(venv)):
            raise Failure(f"{where}: {key} was imported from {result[key]}, not "
                          f"from the venv {venv}")
    print(f"ok: installed {where}: {result['hypertune']}, stubs "
          f"{os.path.dirname(result['stub'])}, service {result['service']}, "
          f"subpackages {sorted(result['subpackages']) or 'none in the source'}")



def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--hypertuned")
    parser.add_argument("--python", default=sys.executable,
                        help="the python3 whose venv and pip are used")
    args = parser.parse_args()

    for module in ("venv", "ensurepip", "pip"):
        probe = subprocess.run([args.python, "-c", f"import {module}"],
                               capture_output=True)
        if probe.returncode != 0:
            print(f"SKIPPED: {args.python} has no {module} module "
                  "(Debian 12: apt-get install python3-venv python3-pip)")
            return SKIP

    # setup.py's generators (python/setup.py, protoc_command).
    has_grpc_tools = subprocess.run([args.python, "-c", "import grpc_tools.protoc"],
                                    capture_output=True).returncode == 0
    if not has_grpc_tools and not (shutil.which("protoc") and shutil.which("grpc_python_plugin")):
        print("SKIPPED: neither grpc_tools (python3-grpc-tools) nor protoc with "
              "grpc_python_plugin (protobuf-compiler-grpc) is installed: the stubs "
              "cannot be generated")
        return SKIP

    source = os.path.abspath(args.source_dir)
    expected = subpackages(os.path.join(source, "python", "hypertune"))
    env = clean_env()
    with tempfile.TemporaryDirectory(prefix="hypertune-package-") as tmp:
        try:
            checkout = os.path.join(tmp, "checkout")
            shutil.copytree(os.path.join(source, "python"), os.path.join(checkout, "python"),
                            ignore=shutil.ignore_patterns("__pycache__", "build",
                                                          "*.egg-info", "v1"))
            shutil.copytree(os.path.join(source, "proto"), os.path.join(checkout, "proto"))

            venv = os.path.join(tmp, "venv")
            run([args.python, "-m", "venv", "--system-site-packages", venv],
                "making a venv")
            python = os.path.join(venv, "bin", "python")
            pip = [python, "-m", "pip", "install", "--no-build-isolation",
                   "--no-index", "--quiet"]

            run(pip + [os.path.join(checkout, "python")],
                "pip install ./python", cwd=checkout, env=env)
            check_import(python, venv, expected, env, "from the source tree")

            # The sdist route: built from the copy, installed from a folder
            # with no proto/ beside it.
            run([python, "setup.py", "--quiet", "sdist", "--dist-dir",
                 os.path.join(tmp, "dist")], "building the sdist",
                cwd=os.path.join(checkout, "python"), env=env)
            (archive,) = os.listdir(os.path.join(tmp, "dist"))
            unpacked = os.path.join(tmp, "unpacked")
            shutil.unpack_archive(os.path.join(tmp, "dist", archive), unpacked)
            (sdist_root,) = os.listdir(unpacked)
            run(pip + ["--force-reinstall", "--no-deps",
                       os.path.join(unpacked, sdist_root)],
                "pip install of the sdist", cwd=tmp, env=env)
            check_import(python, venv, expected, env, "from the sdist")

            # `python3 -m build` where python3-build is installed: the sdist,
            # then the wheel from it unpacked elsewhere; the wheel installed.
            if subprocess.run([python, "-c", "import build"], env=env,
                              capture_output=True).returncode == 0:
                wheels = os.path.join(tmp, "wheels")
                run([python, "-m", "build", "--no-isolation", "--outdir", wheels,
                     os.path.join(checkout, "python")], "python3 -m build", cwd=tmp, env=env)
                (wheel,) = [w for w in os.listdir(wheels) if w.endswith(".whl")]
                run(pip + ["--force-reinstall", "--no-deps", os.path.join(wheels, wheel)],
                    "pip install of the wheel", cwd=tmp, env=env)
                check_import(python, venv, expected, env, "from python3 -m build's wheel")
            else:
                print("note: python3 -m build not checked: python3-build is not installed")

            if args.hypertuned:
                process, address = start_server(args.hypertuned, tmp)
                try:
                    out = run([python, "-c", STUDY_CHECK, address],
                              "creating a study with the installed package",
                              cwd=venv, env=env)
                finally:
                    process.terminate()
                    process.wait(timeout=30)
                if "COMPLETED" not in out:
                    raise Failure(f"the study's trial did not complete: {out}")
                print(f"ok: the installed package created a study on {address}: "
                      f"{out.strip()}")
        except Failure as failure:
            print(f"FAIL: {failure}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
