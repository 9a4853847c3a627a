#!/usr/bin/env python3
"""Builds the Debian packages (deploy/deb/build-debs.sh, `make deb`) and
uses them unpacked.

Runs the script on the built programs into a temporary folder, then checks
each package's control fields and files (dpkg-deb), unpacks both into a
temporary root with `dpkg -x` (nothing is installed on the system), starts
the unpacked hypertuned, creates a study with the unpacked Python client and
lists it with the unpacked CLI.

Exits 77 (ctest: skipped, with the reason) where dpkg-deb is absent.

Usage: check_debs.py --source-dir ROOT --bin-dir DIR [--python-dir DIR]
"""

import argparse
import glob
import os
import shutil
import sys
import tempfile

from package_checks import Failure, run, start_server

SKIP = 77
# What each package must hold (paths inside it).
EXPECTED_FILES = {
    "hypertuned": ["./usr/bin/hypertuned", "./usr/bin/hypertune",
                   "./lib/systemd/system/hypertuned.service",
                   "./etc/default/hypertuned", "./usr/lib/sysusers.d/hypertune.conf"],
    "hypertune-client": ["./usr/lib/python3/dist-packages/hypertune/__init__.py",
                         "./usr/lib/python3/dist-packages/hypertune/v1/hypertune_pb2.py",
                         "./usr/lib/python3/dist-packages/hypertune/v1/hypertune_pb2_grpc.py"],
}
# A dependency each package's Depends must name.
EXPECTED_DEPENDS = {"hypertuned": ["libgrpc++", "libsqlite3", "libmicrohttpd"],
                    "hypertune-client": ["python3-grpcio", "python3-protobuf"]}
STUDY_CHECK = r"""
import sys
import hypertune
print(hypertune.__file__)
study = hypertune.Client(sys.argv[1]).create_study({"name": "deb-check", "spec": {
    "parameters": [{"name": "x", "double_spec": {"min": 0, "max": 1}}],
    "metrics": [{"name": "loss", "goal": "MINIMIZE"}], "max_trials": 2}})
trial = study.ask()
trial.complete(loss=trial.params["x"])
print([t.state for t in study.trials()])
"""




def check_package(deb, package):
    """The package's name, dependencies and files."""
    name = run(["dpkg-deb", "-f", deb, "Package"], "reading the control file").strip()
    if name != package:
        raise Failure(f"{deb}: Package is {name!r}, not {package!r}")
    depends = run(["dpkg-deb", "-f", deb, "Depends"], "reading Depends").strip()
    for needed in EXPECTED_DEPENDS[package]:
        if needed not in depends:
            raise Failure(f"{deb}: Depends ({depends}) names no {needed}")
    listing = run(["dpkg-deb", "-c", deb], "listing the package")
    paths = {line.split()[-1] for line in listing.splitlines() if line.strip()}
    missing = [p for p in EXPECTED_FILES[package] if p not in paths]
    if missing:
        raise Failure(f"{deb} lacks {', '.join(missing)}")
    print(f"ok: {os.path.basename(deb)}: {len(paths)} paths, Depends: {depends}")



def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--python-dir")
    parser.add_argument("--python", default=sys.executable,
                        help="the python3 (with grpcio and protobuf) that runs the client")
    args = parser.parse_args()
    if not shutil.which("dpkg-deb"):
        print("SKIPPED: dpkg-deb not found (not a Debian system)")
        return SKIP

    script = os.path.join(os.path.abspath(args.source_dir), "deploy", "deb", "build-debs.sh")
    with tempfile.TemporaryDirectory(prefix="hypertune-debs-") as tmp:
        try:
            command = [script, "--bin-dir", args.bin_dir, "--out-dir", os.path.join(tmp, "out")]
            if args.python_dir:
                command += ["--python-dir", args.python_dir]
            print(run(command, "deploy/deb/build-debs.sh").strip())
            debs = {}
            for package in EXPECTED_FILES:
                found = glob.glob(os.path.join(tmp, "out", f"{package}_*.deb"))
                if len(found) != 1:
                    raise Failure(f"build-debs.sh made {len(found)} {package} packages, not 1")
                debs[package] = found[0]
                check_package(found[0], package)

            root = os.path.join(tmp, "root")
            for deb in debs.values():
                run(["dpkg", "-x", deb, root], f"unpacking {deb}")
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            env["PYTHONPATH"] = os.path.join(root, "usr", "lib", "python3", "dist-packages")
            process, address = start_server(os.path.join(root, "usr", "bin", "hypertuned"), tmp)
            try:
                out = run([args.python, "-c", STUDY_CHECK, address],
                          "creating a study with the unpacked client", env=env)
                listed = run([os.path.join(root, "usr", "bin", "hypertune"), "--server",
                              address, "study", "list"], "the unpacked CLI's study list")
            finally:
                process.terminate()
                process.wait(timeout=30)
            module, states = out.strip().splitlines()[-2:]
            if not module.startswith(root):
                raise Failure(f"hypertune was imported from {module}, not the unpacked package")
            if "COMPLETED" not in states or "deb-check" not in listed:
                raise Failure(f"the study was not made as it should: {states}\n{listed}")
            print(f"ok: the unpacked hypertuned on {address}, the unpacked client "
                  f"({module}) created deb-check {states}, the unpacked CLI lists it")
        except Failure as failure:
            print(f"FAIL: {failure}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
