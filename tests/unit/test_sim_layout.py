"""One description of AWS's event source scaling, shared by the local stack and the simulator.

Which package may import which (no circle, the AWS facts beneath the local stack and the
simulator, the layer needing none of them) is import-linter's contracts in pyproject.toml, run
by `make lint`."""

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "wakeup_awsfacts": ROOT / "awsfacts" / "wakeup_awsfacts",
    "wakeup_local": ROOT / "local" / "wakeup_local",
    "wakeup_sim": ROOT / "sim" / "wakeup_sim",
    "wakeup_calibrate": ROOT / "calibrate" / "wakeup_calibrate",
}


def modules(packages: Mapping[str, Path]) -> dict[str, Path]:
    found = {}
    for package, folder in packages.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            found[".".join((package, *parts[: -1 if parts[-1] == "__init__" else None]))] = path
    return found


def imported(path: Path) -> Iterator[str]:
    """Every module `path` imports, wherever the import statement stands (a name imported from a
    package counts as its submodule, which may or may not exist)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def graph(packages: Mapping[str, Path]) -> dict[str, set[str]]:
    known = modules(packages)
    return {
        name: {other for other in imported(path) if other in known and other != name} for name, path in known.items()
    }


def test_the_local_stack_and_the_simulator_scale_the_event_source_by_one_rule() -> None:
    edges = graph(PACKAGES)
    assert "wakeup_awsfacts.sqs_scaling" in edges["wakeup_local.event_sources.sqs_poller"]
    assert "wakeup_awsfacts.sqs_scaling" in edges["wakeup_sim.event_source"]
