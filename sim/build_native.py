"""Compiles the simulator's hottest modules with mypyc, for `make simulate`: `python sim/build_native.py DIR`.

DIR gets a copy of `wakeup_sim` and `wakeup_awsfacts` with the modules in `HOT` compiled beside
their source (a `.so` is imported before its `.py`); the rest of the copy, and the service's own
code (`wakeup`, which the simulation runs as Lambda runs it), stay Python. `make simulate` puts DIR
first on the path. The sources are the same: tests/unit/test_sim_native.py runs scenarios both ways
and compares every figure, and mypyc checks at run time the types that mypy checks in `make lint`.

Why these: on the steady 1,000 wakes a second, compiling these six took 23% less CPU; compiling the
world, the Lambda and API Gateway models, the hosts and the logs as well took more, not less (a
greenlet's switch saves the C stack between its start and the switch, which compiled callers make
deeper; docs/scaling.md). DIR sits in the checkout, beside `sim/`: `deployment.ROOT` (two levels up
from the module) stays the checkout's root, where template.yaml and docs/ are.

Without a C compiler or Python's headers the build fails: this prints why and leaves no DIR, and
`make simulate` runs the Python modules, as it did before (about a quarter slower).
"""

import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"wakeup_sim": ROOT / "sim" / "wakeup_sim", "wakeup_awsfacts": ROOT / "awsfacts" / "wakeup_awsfacts"}
HOT = (
    "wakeup_sim/engine.py",
    "wakeup_sim/throughput.py",
    "wakeup_sim/dynamodb.py",
    "wakeup_sim/sqs.py",
    "wakeup_sim/event_source.py",
    "wakeup_awsfacts/dynamodb.py",
)
# The project's mypy settings (pyproject.toml) for the copy alone: its own `mypy_path` would show
# mypy each package twice, the copy's and the checkout's.
MYPY_CONFIG = """\
[mypy]
strict = True
plugins = pydantic.mypy
python_version = 3.11
explicit_package_bases = True
disallow_untyped_decorators = False
mypy_path = {layer}

[mypy-greenlet.*]
ignore_missing_imports = True
"""


def build(target: Path) -> None:
    """Builds the copy in a folder beside `target`, then puts it in its place: a failed build leaves
    no half-made copy for `make simulate` to import."""
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        for name, source in PACKAGES.items():
            shutil.copytree(source, work / name, ignore=shutil.ignore_patterns("__pycache__"))
        (work / "mypy.ini").write_text(MYPY_CONFIG.format(layer=ROOT / "layers" / "wakeup"), encoding="utf-8")
        _compile(work)
        (work / "mypy.ini").unlink()
        shutil.rmtree(work / "build", ignore_errors=True)
        shutil.rmtree(target, ignore_errors=True)
        work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _compile(work: Path) -> None:
    # mypyc and setuptools are imported here: a machine without them hears why from `main`.
    from mypyc.build import mypycify
    from setuptools import setup

    # mypyc builds with -Werror; gcc 12 calls its float comparison `x != x` (NaN) tautological.
    os.environ["CFLAGS"] = f"{os.environ.get('CFLAGS', '')} -Wno-tautological-compare".strip()
    cwd = Path.cwd()
    os.chdir(work)
    try:
        setup(
            name="wakeup_sim_native",
            ext_modules=mypycify(["--config-file", "mypy.ini", *HOT]),
            script_args=["--quiet", "build_ext", "--inplace"],
        )
    finally:
        os.chdir(cwd)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    target = Path(argv[0]).resolve()
    try:
        build(target)
    except (Exception, SystemExit) as exc:  # setuptools reports a compiler's failure as SystemExit
        shutil.rmtree(target, ignore_errors=True)
        print(f"the simulator's modules were not compiled ({exc}); make simulate runs them as Python", file=sys.stderr)
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
