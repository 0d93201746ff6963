"""The import graph of the local stack, the simulator, the calibration and the AWS facts they share:
no circle (imports inside functions count too, so none can hide one), and one description of AWS."""

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
LAYER = ROOT / "layers" / "wakeup" / "wakeup"


def modules(packages: Mapping[str, Path]) -> dict[str, Path]:
    found = {}
    for package, folder in packages.items():
        for path in folder.glob("*.py"):
            found[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
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


def a_cycle(edges: Mapping[str, set[str]]) -> list[str] | None:
    """One import circle (its modules, the first repeated at the end), or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for target in sorted(edges.get(node, ())):
            if found := visit(target):
                return found
        path.pop()
        done.add(node)
        return None

    for start in sorted(edges):
        if found := visit(start):
            return found
    return None


def test_the_cycle_finder_finds_a_circle_through_three_modules() -> None:
    assert a_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert a_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_import_circle_among_the_local_stack_the_simulator_the_calibration_and_the_aws_facts() -> None:
    edges = graph(PACKAGES)
    assert "wakeup_sim.capacity" in edges and "wakeup_local.stack" in edges  # the packages were read
    assert a_cycle(edges) is None


def test_the_local_stack_and_the_simulator_scale_the_event_source_by_one_rule() -> None:
    edges = graph(PACKAGES)
    assert "wakeup_awsfacts.sqs_scaling" in edges["wakeup_local.sqs_poller"]
    assert "wakeup_awsfacts.sqs_scaling" in edges["wakeup_sim.event_source"]


def test_the_aws_facts_import_neither_the_local_stack_nor_the_simulator() -> None:
    facts = modules({"wakeup_awsfacts": PACKAGES["wakeup_awsfacts"]})
    assert facts
    for name, path in facts.items():
        outside = {m for m in imported(path) if m.split(".")[0] in ("wakeup_local", "wakeup_sim", "wakeup_calibrate")}
        assert not outside, f"{name} imports {outside}"


def test_the_lambda_layer_does_not_need_the_aws_facts() -> None:
    paths = list(LAYER.rglob("*.py"))
    assert paths
    for path in paths:
        assert not [m for m in imported(path) if m.startswith("wakeup_awsfacts")], path
