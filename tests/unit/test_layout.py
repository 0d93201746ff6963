"""What import-linter cannot read, read with `ast`: no private name imported across modules, no
class in the layer over 250 lines, and no handler importing anything from `wakeup.table` (a
handler is a module of its own on the function's path, not in a package import-linter can build).

The floor plan itself (no circle, no arrow back up: handlers → api → logic → table, the tools in
layers above the service) is import-linter's contracts in pyproject.toml, run by `make lint`."""

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "layers" / "wakeup"
# Package roots: the modules under each are named from there, as Python imports them.
ROOTS = {LAYER: "wakeup", ROOT / "sim": "wakeup_sim", ROOT / "functions": None, ROOT: "bench"}
# The API's two handlers, and the others, which keep to the same rule.
HANDLERS = ("instances_handler", "wake_handler", "caller_handler", "sweeper_handler", "planner_handler")
MAX_CLASS_LINES = 250


@dataclass(frozen=True)
class Import:
    importer: str
    module: str
    # The names taken from `module` (`from module import name`), or used as `module.name`.
    names: tuple[str, ...]
    line: int


def _module_name(path: Path) -> str:
    for root, package in ROOTS.items():
        if path.is_relative_to(root):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if package is None:  # a function's folder is on its path: its handler imports by its own name
                parts = parts[-1:]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            return ".".join(parts)
    raise ValueError(path)


def _sources() -> dict[str, Path]:
    found = {}
    for root, package in ROOTS.items():
        base = root / package if package else root
        for path in sorted(base.rglob("*.py")):
            # Not a virtual environment's (`make bench` makes bench/.venv) nor another hidden folder's.
            if not any(part.startswith(".") for part in path.relative_to(base).parts):
                found[_module_name(path)] = path
    return found


MODULES = _sources()


def _imports(name: str, path: Path) -> Iterator[Import]:
    tree = ast.parse(path.read_text(), str(path))
    aliases: dict[str, str] = {}  # a local name -> the project module it stands for
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    aliases[alias.asname or alias.name] = alias.name
                    yield Import(name, alias.name, (), node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if submodule in MODULES:  # `from package import module`
                    aliases[alias.asname or alias.name] = submodule
                    yield Import(name, submodule, (), node.lineno)
                elif node.module in MODULES:
                    yield Import(name, node.module, (alias.name,), node.lineno)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            yield Import(name, aliases[node.value.id], (node.attr,), node.lineno)


@functools.cache
def _all_imports() -> list[Import]:
    """Every import of the project's modules, read once, by the tests that need it (not at every
    worker's collection)."""
    return [found for name, path in MODULES.items() for found in _imports(name, path)]


def test_the_layer_functions_and_simulator_are_read() -> None:
    assert {"wakeup.table.dynamodb", "wakeup.logic.delivery", "instances_handler", "wakeup_sim.world"} <= set(MODULES)


def test_no_private_name_is_imported_across_modules() -> None:
    private = [
        f"{found.importer}:{found.line} {found.module}.{name}"
        for found in _all_imports()
        for name in found.names
        if name.startswith("_") and not name.startswith("__") and found.module != found.importer
    ]
    assert private == []


def _classes() -> Iterator[tuple[str, int]]:
    for name, path in MODULES.items():
        if path.is_relative_to(LAYER):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    assert node.end_lineno is not None
                    yield f"{name}.{node.name}", node.end_lineno - node.lineno + 1


def test_no_class_in_the_layer_is_over_250_lines() -> None:
    sizes = dict(_classes())
    assert "wakeup.table.dynamodb.DynamoStore" in sizes
    assert {name: lines for name, lines in sizes.items() if lines > MAX_CLASS_LINES} == {}


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@pytest.mark.parametrize("handler", HANDLERS)
def test_a_handler_imports_nothing_from_the_table(handler: str) -> None:
    imported = {found.module for found in _all_imports() if found.importer == handler}
    assert imported, "the handler's imports were read"
    assert [m for m in imported if _within(m, "wakeup.table")] == []
