"""Builds the pure-Python package `hypertune`, generating its gRPC stubs.

The stubs (hypertune/v1: hypertune_pb2.py, .pyi and hypertune_pb2_grpc.py)
are generated from proto/hypertune.proto when the package is built, never
kept in the source tree, so the proto stays the one definition of the API.
This file adds that step to setuptools' build_py; everything else is in
pyproject.toml.

Where the proto is found, first match wins:

1. $HYPERTUNE_PROTO, the path of hypertune.proto (a build from elsewhere);
2. proto/hypertune.proto beside this file: a source distribution, whose
   sdist step below copies the proto in, so `python3 -m build`, which builds
   the wheel from an unpacked sdist in a temporary folder, finds it;
3. ../proto/hypertune.proto: the repository's own, for `pip install ./python`
   (pip 21.3 and later build in place).

Neither found is an error naming the three places. The generator is
grpc_tools.protoc where python3-grpc-tools (grpcio-tools) is importable,
else `protoc` (protobuf-compiler) with `grpc_python_plugin`
(protobuf-compiler-grpc); $PROTOC and $GRPC_PYTHON_PLUGIN name others.

An editable install (`pip install -e`) gets no stubs: build_py does not run
for it. Use the built package, or PYTHONPATH=build/python after `make build`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_NAME = "hypertune.proto"
# The proto's place inside an sdist, relative to this file.
SDIST_PROTO = os.path.join("proto", PROTO_NAME)
# Where the stubs go, as a package path: protoc names the generated modules
# after the proto's path under --proto_path, so the proto is placed at
# hypertune/v1/hypertune.proto there and the gRPC stub imports
# hypertune.v1.hypertune_pb2 by that name.
STUB_PACKAGE = os.path.join("hypertune", "v1")
STUB_FILES = ("__init__.py", "hypertune_pb2.py", "hypertune_pb2.pyi",
              "hypertune_pb2_grpc.py")


def find_proto() -> str:
    """The path of hypertune.proto, by the order in the module docstring."""
    from_env = os.environ.get("HYPERTUNE_PROTO")
    if from_env:
        if not os.path.isfile(from_env):
            raise SystemExit(f"HYPERTUNE_PROTO={from_env}: no such file "
                             "(it names the path of hypertune.proto)")
        return os.path.abspath(from_env)
    candidates = [os.path.join(HERE, SDIST_PROTO),
                  os.path.normpath(os.path.join(HERE, "..", "proto", PROTO_NAME))]
    for candidate in candidates:
        if os.path.isfile(candidate):
            return candidate
    raise SystemExit(
        "hypertune: cannot find hypertune.proto to generate the gRPC stubs: "
        "$HYPERTUNE_PROTO is unset and neither " + " nor ".join(candidates)
        + " exists. Build from the repository (pip install ./python) or set "
        "HYPERTUNE_PROTO=/path/to/proto/hypertune.proto.")


def protoc_command(proto_root: str, out_dir: str) -> list[str]:
    """The command that generates the Python and gRPC-Python stubs."""
    flags = [f"--proto_path={proto_root}", f"--python_out={out_dir}",
             f"--pyi_out={out_dir}", f"--grpc_python_out={out_dir}"]
    if not os.environ.get("PROTOC"):
        try:
            import grpc_tools.protoc
        except ImportError:
            pass
        else:
            # grpc_tools bundles the well-known types (field_mask.proto).
            well_known = os.path.join(os.path.dirname(grpc_tools.protoc.__file__), "_proto")
            return [sys.executable, "-m", "grpc_tools.protoc",
                    f"--proto_path={well_known}", *flags]
    protoc = os.environ.get("PROTOC") or shutil.which("protoc")
    plugin = os.environ.get("GRPC_PYTHON_PLUGIN") or shutil.which("grpc_python_plugin")
    missing = [what for what, path in (("protoc (Debian: protobuf-compiler)", protoc),
                                       ("grpc_python_plugin (Debian: "
                                        "protobuf-compiler-grpc)", plugin))
               if not path]
    if missing:
        raise SystemExit("hypertune: cannot generate the gRPC stubs: "
                         + " and ".join(missing) + " not found on PATH, and "
                         "grpc_tools (python3-grpc-tools) is not importable")
    # protoc finds google/protobuf/*.proto in /usr/include by itself.
    return [protoc, f"--plugin=protoc-gen-grpc_python={plugin}", *flags]


def generate_stubs(build_lib: str) -> list[str]:
    """Generates hypertune/v1 under build_lib; returns the files written."""
    proto = find_proto()
    with tempfile.TemporaryDirectory(prefix="hypertune-proto-") as proto_root:
        placed = os.path.join(proto_root, STUB_PACKAGE, PROTO_NAME)
        os.makedirs(os.path.dirname(placed))
        shutil.copyfile(proto, placed)
        os.makedirs(os.path.join(build_lib, STUB_PACKAGE), exist_ok=True)
        command = protoc_command(proto_root, build_lib) + [placed]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"hypertune: generating the gRPC stubs from {proto} failed "
                             f"(exit {result.returncode}): {' '.join(command)}\n"
                             + result.stderr)
    init = os.path.join(build_lib, STUB_PACKAGE, "__init__.py")
    with open(init, "w", encoding="utf-8") as file:
        file.write(f'"""gRPC stubs generated from {PROTO_NAME} at build time."""\n')
    written = [os.path.join(build_lib, STUB_PACKAGE, name) for name in STUB_FILES]
    absent = [path for path in written if not os.path.isfile(path)]
    if absent:
        raise SystemExit(f"hypertune: protoc did not write {', '.join(absent)}")
    print(f"hypertune: generated the gRPC stubs from {proto}")
    return written


class BuildPyWithStubs(build_py):
    """build_py, then the stubs next to the copied modules."""

    def run(self) -> None:
        super().run()
        self.generated = generate_stubs(self.build_lib)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        # The wheel's RECORD and `setup.py install --record` list these too.
        return super().get_outputs(include_bytecode) + list(getattr(self, "generated", []))


class SdistWithProto(sdist):
    """sdist, with the proto copied in (see the module docstring, place 2)."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        target = os.path.join(base_dir, SDIST_PROTO)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(find_proto(), target)


setup(cmdclass={"build_py": BuildPyWithStubs, "sdist": SdistWithProto})
