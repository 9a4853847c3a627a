"""The layout and lint of the hypertune package's sources, read from the
source tree (python/hypertune), not run.

pylint (Debian's, with tools/pylintrc) finds no error and no warning in any
module. Among its checks are the package's two layout rules:

- cyclic-import: the modules import each other without a cycle, counting
  imports inside functions (an import moved into a function to dodge a
  cycle is the cycle still); pylint leaves out those under
  ``if TYPE_CHECKING:``, which never run;
- protected-access: no module reaches into another object's privates
  (``x._name`` where ``x`` is not ``self`` or ``cls``), but for the few
  other libraries' privates in ALLOWED_REACHES.

What pylint does not see is checked here: ``getattr(x, "_name")`` and its
kin reach no private either.

Run as a program, it prints pylint's findings and the getattr reaches.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from typing import Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE_DIR = os.path.join(ROOT, "python")
PACKAGE_DIR = os.path.join(SOURCE_DIR, "hypertune")
PACKAGE = "hypertune"
PYLINTRC = os.path.join(ROOT, "tools", "pylintrc")
# The generated gRPC stubs: not ours to lay out (and git-ignored).
GENERATED = f"{PACKAGE}.v1"

# Private names of other libraries' objects that have no public
# equivalent, as (module, name); each is named with the reason, so that the
# list stays short.
ALLOWED_REACHES = {
    # Optuna 3.1 has no public trial id on FrozenTrial (trial.number is
    # unique only within one study, and a sampler may serve several).
    (f"{PACKAGE}.optuna", "_trial_id"),
    # Nor a public membership test on a distribution.
    (f"{PACKAGE}.optuna", "_contains"),
}

_PROTECTED_MEMBER = re.compile(r"protected member (\w+)")


def _modules() -> dict[str, str]:
    """Module name -> source path, for every .py of the package."""
    found = {}
    for folder, subfolders, files in os.walk(PACKAGE_DIR):
        subfolders[:] = sorted(s for s in subfolders if s not in ("v1", "__pycache__"))
        relative = os.path.relpath(folder, PACKAGE_DIR)
        parts = [PACKAGE] + ([] if relative == "." else relative.split(os.sep))
        for file in sorted(files):
            if not file.endswith(".py"):
                continue
            name = ".".join(parts if file == "__init__.py" else parts + [file[:-3]])
            found[name] = os.path.join(folder, file)
    return found


def pylint(paths: list[str], cwd: str) -> list[dict]:
    """pylint's findings (its JSON records) over `paths`, with the project's
    settings, run from `cwd` (the folder above the package). Fails the test
    when pylint is missing or could not run."""
    run = subprocess.run(
        [sys.executable, "-m", "pylint", f"--rcfile={PYLINTRC}", "--output-format=json",
         *paths],
        cwd=cwd, capture_output=True, text=True, check=False)
    if "No module named pylint" in run.stderr:
        raise AssertionError(
            f"pylint is missing for {sys.executable}: apt-get install pylint (make deps)")
    # pylint's status is a bit mask of what it found; 1 (fatal) and 32
    # (usage error) mean it could not lint.
    assert not run.returncode & (1 | 32), f"pylint could not run:\n{run.stdout}{run.stderr}"
    return json.loads(run.stdout or "[]")


def _allowed(finding: dict) -> bool:
    member = _PROTECTED_MEMBER.search(finding["message"])
    return (finding["symbol"] == "protected-access" and member is not None
            and (finding["module"], member.group(1)) in ALLOWED_REACHES)


def package_findings() -> list[str]:
    """pylint's findings over the package but the allowed reaches, one line
    each."""
    paths = [os.path.relpath(p, SOURCE_DIR) for p in _modules_cache.values()]
    return [
        f"python/{f['path']}:{f['line']}: {f['message-id']} {f['message']} ({f['symbol']})"
        for f in pylint(paths, SOURCE_DIR) if not _allowed(f)
    ]


def getattr_reaches(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, expression) of each getattr, setattr, hasattr or delattr of a
    private name given as a string, which pylint's protected-access does not
    see."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and node.args[1].value.startswith("_")
            and not node.args[1].value.startswith("__")
        ):
            yield node.lineno, ast.unparse(node)


def package_getattr_reaches() -> list[str]:
    found = []
    for path in _modules_cache.values():
        with open(path, encoding="utf-8") as source:
            tree = ast.parse(source.read(), filename=path)
        found += [f"{os.path.relpath(path, ROOT)}:{line}: {expression}"
                  for line, expression in getattr_reaches(tree)]
    return found


_modules_cache = _modules()


def test_the_package_is_found() -> None:
    # A wrong root would make the other tests pass on nothing.
    assert {f"{PACKAGE}", f"{PACKAGE}.client", f"{PACKAGE}.study", f"{PACKAGE}.trial",
            f"{PACKAGE}._transport", f"{PACKAGE}.integration"} <= set(_modules_cache)
    assert GENERATED not in _modules_cache


def test_pylint_finds_nothing() -> None:
    findings = package_findings()
    assert not findings, "pylint (tools/pylintrc):\n" + "\n".join(findings)


def test_pylint_sees_a_cycle_and_a_private_reach(tmp_path) -> None:
    # The settings catch what the rules are about: a cycle closed by an
    # import inside a function, and a reach into another object's private.
    package = tmp_path / "pkg"
    package.mkdir()
    files = {
        "__init__.py": "",
        "a.py": "from pkg import b\n\n\ndef f():\n    return b.g\n",
        "b.py": "def g():\n    from pkg import a\n    return a.f\n",
        "c.py": "def h(client):\n    return client._call\n",
    }
    for name, text in files.items():
        (package / name).write_text(text, encoding="utf-8")
    findings = pylint([f"pkg/{name}" for name in files], str(tmp_path))
    symbols = {(f["module"], f["symbol"]) for f in findings}
    assert any(symbol == "cyclic-import" for _, symbol in symbols), findings
    assert ("pkg.c", "protected-access") in symbols, findings


def test_the_allowed_reaches_are_only_allowed_where_named() -> None:
    named = {"symbol": "protected-access", "module": f"{PACKAGE}.optuna",
             "message": "Access to a protected member _trial_id of a client class"}
    assert _allowed(named)
    assert not _allowed(dict(named, module=f"{PACKAGE}.study"))
    assert not _allowed(dict(named, message="Access to a protected member _call of a"
                                            " client class"))


def test_no_module_reaches_a_private_through_getattr() -> None:
    reaches = package_getattr_reaches()
    assert not reaches, "private attributes reached by name:\n" + "\n".join(reaches)


def test_getattr_reach_detection() -> None:
    tree = ast.parse(
        "getattr(study, '_stops')\nsetattr(x, '_y', 1)\ngetattr(x, '__dict__')\n"
        "getattr(x, 'public')\nhasattr(x, name)\n"
    )
    assert sorted(expression for _, expression in getattr_reaches(tree)) == [
        "getattr(study, '_stops')", "setattr(x, '_y', 1)"
    ]


if __name__ == "__main__":
    every = package_findings() + package_getattr_reaches()
    for line in every:
        print(line)
    print(f"{len(every)} findings (besides {len(ALLOWED_REACHES)} allowed reaches)")
    sys.exit(0)


def test_a_python_without_grpc_is_told_what_it_lacks() -> None:
    # Issue 47: a pyenv python3 without grpcio used to fail deep inside the
    # client with a bare "No module named 'grpc'".
    blocked = subprocess.run(
        [sys.executable, "-c",
         "import sys; sys.modules['grpc'] = None; import hypertune"],
        capture_output=True, text=True, env=os.environ, check=False)
    assert blocked.returncode != 0
    assert "hypertune needs grpcio and protobuf" in blocked.stderr
    assert "/usr/bin/python3" in blocked.stderr
