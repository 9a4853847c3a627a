"""The layout of the hypertune package's sources: its modules import each
other without a cycle, and none reaches into another module's privates.

Read from the source tree (python/hypertune), not run: every ``import`` and
``from ... import`` of a hypertune module counts, wherever it stands (at
module level, under ``if TYPE_CHECKING:``, or inside a function), since an
import moved into a function to dodge a cycle is the cycle still. A private
reach is an attribute access ``x._name`` where ``x`` is not ``self`` or
``cls`` (a module uses its own privates only through its own instances and
classes), or ``getattr(x, "_name")``.

Run as a program, it prints the import graph and the private reaches.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from typing import Iterator, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE_DIR = os.path.join(ROOT, "python", "hypertune")
PACKAGE = "hypertune"
# The generated gRPC stubs: not ours to lay out (and git-ignored).
GENERATED = f"{PACKAGE}.v1"

# Private names of other libraries' objects that have no public
# equivalent; each is named with the reason, so that the list stays short.
ALLOWED_REACHES = {
    # Optuna 3.1 has no public trial id on FrozenTrial (trial.number is
    # unique only within one study, and a sampler may serve several).
    (f"{PACKAGE}.optuna", "trial._trial_id"),
    # Nor a public membership test on a distribution.
    (f"{PACKAGE}.optuna", "distribution._contains"),
}

# What the brief names outright: a client's or a transport's private.
_CLIENT_OR_TRANSPORT_PRIVATE = re.compile(r"\b_?(?:client|transport)\._[A-Za-z]")


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


def _parse(path: str) -> ast.Module:
    with open(path, encoding="utf-8") as source:
        return ast.parse(source.read(), filename=path)


def _resolve(importer: str, node: ast.ImportFrom) -> str:
    """The absolute module a ``from`` import names (relative ones too)."""
    if not node.level:
        return node.module or ""
    package = importer.split(".")
    is_package = _modules_cache[importer].endswith("__init__.py")
    base = package if is_package else package[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(name: str, tree: ast.Module, modules: set[str]) -> set[str]:
    """The package's modules that module ``name`` imports."""
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(name, node)
            for alias in node.names:
                # `from hypertune import _config` imports the submodule;
                # `from hypertune import Client`, the package itself.
                submodule = f"{module}.{alias.name}"
                targets.add(submodule if submodule in modules else module)
    return {t for t in targets if t in modules and t != name}


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (the generated stubs left
    out)."""
    modules = set(_modules_cache)
    return {
        name: imports_of(name, _parse(path), modules) for name, path in _modules_cache.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> Optional[list[str]]:
    """A cycle of ``graph`` as the modules along it (the first repeated at
    the end), or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(graph, WHITE)
    path: list[str] = []

    def visit(node: str) -> Optional[list[str]]:
        colour[node] = GREY
        path.append(node)
        for target in sorted(graph[node]):
            if colour[target] == GREY:
                return path[path.index(target):] + [target]
            if colour[target] == WHITE:
                found = visit(target)
                if found:
                    return found
        path.pop()
        colour[node] = BLACK
        return None

    for start in sorted(graph):
        if colour[start] == WHITE:
            found = visit(start)
            if found:
                return found
    return None


def private_reaches(name: str, tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, expression) of each access to a private attribute of an
    object other than ``self`` or ``cls`` in module ``name``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            attr = node.attr
            if not attr.startswith("_") or (attr.startswith("__") and attr.endswith("__")):
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            expression = ast.unparse(node)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and node.args[1].value.startswith("_")
            and not node.args[1].value.startswith("__")
        ):
            expression = ast.unparse(node)
        else:
            continue
        if (name, expression) not in ALLOWED_REACHES:
            yield node.lineno, expression


_modules_cache = _modules()


def test_the_package_is_found() -> None:
    # A wrong root would make the other tests pass on nothing.
    assert {f"{PACKAGE}", f"{PACKAGE}.client", f"{PACKAGE}.study", f"{PACKAGE}.trial",
            f"{PACKAGE}._transport", f"{PACKAGE}.integration"} <= set(_modules_cache)
    assert GENERATED not in _modules_cache


def test_the_import_graph_finds_imports() -> None:
    graph = import_graph()
    # Spot checks of what the graph must see: a plain `from X import Y`,
    # `from hypertune import _submodule`, and one under TYPE_CHECKING.
    assert f"{PACKAGE}.study" in graph[f"{PACKAGE}.client"]
    assert f"{PACKAGE}._proto" in graph[f"{PACKAGE}.client"]
    assert f"{PACKAGE}.trial" in graph[f"{PACKAGE}.integration.lightning"]


def test_find_cycle_sees_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "the package's modules import in a circle: " + " -> ".join(cycle or [])


def test_no_module_reaches_into_anothers_privates() -> None:
    reaches = [
        f"{os.path.relpath(path, ROOT)}:{line}: {expression}"
        for name, path in _modules_cache.items()
        for line, expression in private_reaches(name, _parse(path))
    ]
    assert not reaches, "private attributes reached from outside:\n" + "\n".join(reaches)


def test_private_reach_detection() -> None:
    tree = ast.parse(
        "self._ok\ncls._ok\nself.__dict__\nclient._call(1)\nself._client._call\n"
        "getattr(study, '_stops')\nx.public\n"
    )
    assert sorted(expression for _, expression in private_reaches("m", tree)) == [
        "client._call", "getattr(study, '_stops')", "self._client._call"
    ]


def test_no_client_or_transport_private_in_the_text() -> None:
    # The plain-text version of the check above, as the issue words it:
    # no `client._`, `self._client._` or `transport._` anywhere.
    found = []
    for path in _modules_cache.values():
        with open(path, encoding="utf-8") as source:
            for number, line in enumerate(source, 1):
                if _CLIENT_OR_TRANSPORT_PRIVATE.search(line.split("#", 1)[0]):
                    found.append(f"{os.path.relpath(path, ROOT)}:{number}: {line.strip()}")
    assert not found, "reaches into a client's or a transport's privates:\n" + "\n".join(found)


if __name__ == "__main__":
    for module, imported in sorted(import_graph().items()):
        print(f"{module} -> {', '.join(sorted(imported)) or '(none)'}")
    print("cycle:", " -> ".join(find_cycle(import_graph()) or ["none"]))
    every = [
        (os.path.relpath(path, ROOT), line, expression)
        for name, path in _modules_cache.items()
        for line, expression in private_reaches(name, _parse(path))
    ]
    for path, line, expression in every:
        print(f"{path}:{line}: {expression}")
    print(f"{len(every)} private reaches (besides {len(ALLOWED_REACHES)} allowed)")
    sys.exit(0)


def test_a_python_without_grpc_is_told_what_it_lacks() -> None:
    # Issue 47: a pyenv python3 without grpcio used to fail deep inside the
    # client with a bare "No module named 'grpc'".
    import subprocess

    blocked = subprocess.run(
        [sys.executable, "-c",
         "import sys; sys.modules['grpc'] = None; import hypertune"],
        capture_output=True, text=True, env=os.environ, check=False)
    assert blocked.returncode != 0
    assert "hypertune needs grpcio and protobuf" in blocked.stderr
    assert "/usr/bin/python3" in blocked.stderr
