"""Compiles the simulator's hottest modules with mypyc, for `make simulate`: `python sim/build_native.py DIR`.

DIR gets a copy of `wakeup_sim` and `wakeup_awsfacts` with the modules in `HOT` compiled beside
their source (a `.so` is imported before its `.py`); the rest of the copy, and the service's own
code (`wakeup`, which the simulation runs as Lambda runs it), stay Python. `make simulate` puts DIR
first on the path. The sources are the same: tests/unit/test_simulation_native.py runs scenarios
both ways and compares every figure, and mypyc checks at run time the types mypy checks in lint.
`--opt-level` sets the C compiler's optimisation: 3 (mypyc's default) for `make simulate`, which
runs the modules for minutes; that test, which runs them for seconds, builds them at 0.

Why these: on the steady 1,000 wakes a second, these are where compiling saves CPU (the token
bucket, `wakeup_awsfacts.token_bucket`, admits every DynamoDB request). Compiling
the world, the Lambda and API Gateway models, the hosts and the logs as well took more, not less:
those call the service's Python code back, and a call from compiled code into Python costs more
than the interpreter's own (docs/scaling.md). DIR sits in the checkout, beside `sim/`:
`deployment.ROOT` (two levels up from the module) stays the checkout's root, where template.yaml
and docs/ are.

Without a C compiler or Python's headers the build fails: this prints why, leaves no DIR and exits
1, and `make simulate` says so and runs the Python modules, as it did before (about a quarter
slower), trying the build again on its next run.
"""

import argparse
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
    "wakeup_awsfacts/token_bucket.py",
)
# The project's mypy settings (pyproject.toml) for the copy alone: its own `mypy_path` would show
# mypy each package twice, the copy's and the checkout's. (mypyc checks for the running Python.)
MYPY_CONFIG = """\
[mypy]
strict = True
plugins = pydantic.mypy
explicit_package_bases = True
disallow_untyped_decorators = False
mypy_path = {layer}

[mypy-greenlet.*]
ignore_missing_imports = True
"""
# In every copy this makes, so that it replaces or removes only a folder of its own making.
MARK = "MADE_BY_BUILD_NATIVE"
# mypyc builds with -Werror; gcc 12 calls mypyc's float comparison `x != x` (NaN) tautological.
# No multiply and add fused into one rounding (gcc does so where the target has FMA, from -O1 up):
# each float operation rounds as Python's does, at every optimisation level.
EXTRA_COMPILE_ARGS = ["-Wno-tautological-compare", "-ffp-contract=off"]
# The C compiler's optimisation (mypyc's own default).
OPT_LEVEL = "3"


class NotOurs(Exception):
    """The target exists and is not a copy this made: it is left as it is."""


def _ours_or_absent(target: Path) -> bool:
    return not target.exists() or (target / MARK).exists()


def build(target: Path, opt_level: str = OPT_LEVEL) -> None:
    """Builds the copy in a folder beside `target`, then puts it in its place: a failed build leaves
    no half-made copy for `make simulate` to import. `opt_level`: the C compiler's (-O)."""
    if not _ours_or_absent(target):
        raise NotOurs(f"{target} exists and was not made by {Path(__file__).name}: name another folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{target.name}.build-", dir=target.parent))
    try:
        for name, source in PACKAGES.items():
            shutil.copytree(source, work / name, ignore=shutil.ignore_patterns("__pycache__"))
        (work / "mypy.ini").write_text(MYPY_CONFIG.format(layer=ROOT / "layers" / "wakeup"), encoding="utf-8")
        _compile(work, opt_level)
        (work / "mypy.ini").unlink()
        for made in ("build", ".mypy_cache"):  # the C sources and objects, mypy's cache
            shutil.rmtree(work / made, ignore_errors=True)
        (work / MARK).touch()
        work.chmod(0o755)  # mkdtemp's folder is its maker's alone
        shutil.rmtree(target, ignore_errors=True)
        work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _compile(work: Path, opt_level: str) -> None:
    # mypyc and setuptools are imported here: a machine without them hears why from `main`.
    from mypyc.build import mypycify
    from setuptools import setup  # type: ignore[import-untyped]  # no types in its package

    cwd = Path.cwd()
    os.chdir(work)  # mypyc writes its C beside the sources it is given, and setup builds in place
    try:
        extensions = mypycify(["--config-file", "mypy.ini", *HOT], opt_level=opt_level)
        for extension in extensions:
            extension.extra_compile_args = [*extension.extra_compile_args, *EXTRA_COMPILE_ARGS]
        setup(name="wakeup_sim_native", ext_modules=extensions, script_args=["--quiet", "build_ext", "--inplace"])
    finally:
        os.chdir(cwd)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--opt-level", choices=["0", "1", "2", "3"], default=OPT_LEVEL, help="the C compiler's -O")
    args = parser.parse_args(argv)
    target = args.dir.resolve()
    try:
        build(target, args.opt_level)
    except NotOurs as exc:
        print(exc, file=sys.stderr)
        return 2
    except (Exception, SystemExit) as exc:  # setuptools reports a compiler's failure as SystemExit
        if _ours_or_absent(target):
            shutil.rmtree(target, ignore_errors=True)
        # mypyc prints what it refuses on stdout, a compiler its errors on stderr: both above.
        reason = str(exc.code) if isinstance(exc, SystemExit) else repr(exc)
        print(f"the simulator's modules were not compiled, see above ({reason})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    status = main(sys.argv[1:])
    # mypy's build leaves millions of objects, whose teardown at exit is a good part of the build:
    # leave without it, as mypy itself does (`mypy.util.hard_exit`). Every file is closed by now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
