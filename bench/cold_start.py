"""Cold start: the import of each handler module in a fresh Python process, as Lambda's init does.

Measured in `bench/.venv`, a virtual environment with only the layer's requirements (the project's
own `.venv` holds moto, cfn-lint and mypy as well, whose packages would change what an import
finds). The interpreter is Python 3.13, the runtime's, where this machine has it; with another, the
report says so. Each probe sets the function's environment from `template.yaml` and
`LAMBDA_TASK_ROOT`, so that the handler's init is Lambda's (with the template's default tracing, its
`POWERTOOLS_TRACE_DISABLED` leaves Powertools' Tracer out).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from wakeup_awsfacts.template import Resolver, load_template
from wakeup_cost.stats import median, table
from wakeup_local.lambda_.functions import FunctionSpec, function_specs

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / "bench" / ".venv"
REQUIREMENTS = ROOT / "layers" / "wakeup" / "requirements.txt"
RUNS_PER_HANDLER = 5
IMPORTTIME_RUNS = 2
PROBE_TIMEOUT_S = 60
INSTALL_TIMEOUT_S = 600
# Never contacted: the probes make clients, which sends nothing.
UNUSED_ENDPOINT = "http://127.0.0.1:9"

# The handler's import, then the clients its first request makes (store and triggers).
_PROBE = """
import json, time
started = time.perf_counter()
import {module}
imported = time.perf_counter()
from wakeup import factories
factories.get_store()
factories.get_triggers()
ready = time.perf_counter()
print(json.dumps({{"import_s": imported - started, "clients_s": ready - imported}}))
"""


@dataclass
class Interpreter:
    python: Path
    version: str
    caveat: str | None


@dataclass
class HandlerColdStart:
    function: str
    import_s: list[float]
    clients_s: list[float]
    process_s: list[float]
    heaviest: list[tuple[str, float]]


def find_python313() -> Path | None:
    """python3.13 where it runs, else pyenv's newest 3.13 (as the Makefile finds it for sam build)."""
    found = shutil.which("python3.13")
    if found and subprocess.run([found, "-c", ""], capture_output=True, check=False).returncode == 0:
        return Path(found)
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    if shutil.which("pyenv"):
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=False)
        if root.returncode == 0 and root.stdout.strip():
            pyenv_root = Path(root.stdout.strip())
    candidates = sorted(
        pyenv_root.glob("versions/3.13*/bin/python3.13"),
        key=lambda path: [int(part) for part in path.parts[-3].split(".") if part.isdigit()],
    )
    return candidates[-1] if candidates else None


def runtime_interpreter() -> Interpreter:
    """`bench/.venv`'s Python with the layer's requirements, made (or remade) when needed."""
    wanted = REQUIREMENTS.read_text()
    stamp = VENV / ".requirements"
    python = VENV / "bin" / "python"
    if not (python.exists() and stamp.exists() and stamp.read_text() == wanted):
        base = find_python313()
        caveat = None if base else "Python 3.13 not found: measured with this machine's Python instead"
        made = _make_venv(base or Path(sys.executable))
        if not made:
            return Interpreter(
                Path(sys.executable),
                _version(Path(sys.executable)),
                "bench/.venv could not be made (pip failed, offline?): measured in the project's .venv, "
                "whose extra packages make imports somewhat slower",
            )
        stamp.write_text(wanted)
        if caveat:
            (VENV / ".caveat").write_text(caveat)
    caveat_file = VENV / ".caveat"
    return Interpreter(python, _version(python), caveat_file.read_text() if caveat_file.exists() else None)


def _make_venv(base: Path) -> bool:
    print(f"making bench/.venv with {base} and {REQUIREMENTS.relative_to(ROOT)} ...", file=sys.stderr)
    shutil.rmtree(VENV, ignore_errors=True)
    steps = [
        [str(base), "-m", "venv", str(VENV)],
        [str(VENV / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", "-r", str(REQUIREMENTS)],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
        if done.returncode != 0:
            print(done.stdout + done.stderr, file=sys.stderr)
            shutil.rmtree(VENV, ignore_errors=True)
            return False
    return True


def _version(python: Path) -> str:
    asked = [str(python), "-c", "import sys; print(sys.version.split()[0])"]
    return subprocess.run(asked, capture_output=True, text=True, check=False).stdout.strip()


def _functions() -> list[FunctionSpec]:
    template = load_template(ROOT / "template.yaml")
    resolver = Resolver(template, stack_name="bench", region="us-east-1", endpoint_url=UNUSED_ENDPOINT)
    return function_specs(template, resolver, process_env={})


def _environment(function: FunctionSpec) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.pathsep.join(str(path) for path in (*function.layer_dirs, function.code_dir)),
        # What Lambda sets and Powertools reads (Tracer is on only inside Lambda).
        "LAMBDA_TASK_ROOT": str(function.code_dir),
        "AWS_LAMBDA_FUNCTION_NAME": function.name,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.memory_mb),
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": UNUSED_ENDPOINT,
        **function.environment,
    }


def _run_as_lambda(python: Path, function: FunctionSpec, *args: str) -> subprocess.CompletedProcess[str]:
    """`python args` in a fresh process, in the function's folder with its environment, as Lambda's init."""
    return subprocess.run(
        [str(python), *args],
        env=_environment(function),
        cwd=function.code_dir,
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
        check=False,
    )


def _probe(python: Path, function: FunctionSpec) -> tuple[float, float, float]:
    module = function.handler.rpartition(".")[0]
    started = time.perf_counter()
    done = _run_as_lambda(python, function, "-c", _PROBE.format(module=module))
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"the cold start probe of {module} failed:\n{done.stderr}")
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    return float(measured["import_s"]), float(measured["clients_s"]), elapsed


def _heaviest(python: Path, function: FunctionSpec, count: int = 6) -> list[tuple[str, float]]:
    """The top-level packages whose own module code took longest to import (`-X importtime`, the
    median of a few runs)."""
    module = function.handler.rpartition(".")[0]
    by_package: dict[str, list[float]] = defaultdict(list)
    for _ in range(IMPORTTIME_RUNS):
        done = _run_as_lambda(python, function, "-X", "importtime", "-c", f"import {module}")
        run: dict[str, float] = defaultdict(float)
        for line in done.stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            self_us, _, name = (part.strip() for part in line.removeprefix("import time:").split("|"))
            run[name.split(".")[0]] += int(self_us) / 1e6
        for package, seconds in run.items():
            by_package[package].append(seconds)
    medians = {package: median(times) for package, times in by_package.items()}
    return sorted(medians.items(), key=lambda item: item[1], reverse=True)[:count]


def measure() -> tuple[Interpreter, list[HandlerColdStart]]:
    interpreter = runtime_interpreter()
    results = []
    for function in _functions():
        # One run first, unmeasured, so every measured run finds the bytecode compiled.
        _probe(interpreter.python, function)
        runs = [_probe(interpreter.python, function) for _ in range(RUNS_PER_HANDLER)]
        results.append(
            HandlerColdStart(
                function=function.logical_id,
                import_s=[run[0] for run in runs],
                clients_s=[run[1] for run in runs],
                process_s=[run[2] for run in runs],
                heaviest=_heaviest(interpreter.python, function),
            )
        )
    return interpreter, results


def report(interpreter: Interpreter, results: list[HandlerColdStart]) -> str:
    rows = [
        (
            result.function,
            f"{median(result.import_s) * 1000:.0f} ms",
            f"{min(result.import_s) * 1000:.0f} ms",
            f"{median(result.clients_s) * 1000:.0f} ms",
            f"{median(result.process_s) * 1000:.0f} ms",
            ", ".join(f"{name} {seconds * 1000:.0f}" for name, seconds in result.heaviest[:4]),
        )
        for result in results
    ]
    lines = [
        f"Python {interpreter.version} in `{_shown(interpreter.python)}`, "
        f"median of {RUNS_PER_HANDLER} fresh processes per handler (bytecode already compiled).",
    ]
    if interpreter.caveat:
        lines.append(f"Caveat: {interpreter.caveat}.")
    lines += [
        "",
        table(
            [
                "function",
                "import (median)",
                "import (min)",
                "+ boto3 clients",
                "whole process",
                "heaviest packages (own ms)",
            ],
            rows,
        ),
    ]
    return "\n".join(lines)


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)
