"""The packages an integrator or an operator installs on their own (issue 38, "Packages that install
alone"): `wakeup-admin` (admin/) and `wakeup-client` (client/), each built as a wheel and installed
in a clean virtual environment of its own, with pip and this machine's package index, as a user
would. Neither may bring the local stack (moto, Lambda's runtime client), and each CLI runs.

The sources are copied first (admin/, client/ and the layer's package admin/ builds from), so that
a build folder left in the checkout neither feeds the wheels nor is raced by another run.
"""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCAL_STACK = ("moto", "awslambdaric", "setproctitle")
BUILD_LEFTOVERS = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "dist")
# One pip command at most: it waits on the index, and on a loaded machine.
INSTALL_TIMEOUT_S = 600

# Building a wheel and installing it with its dependencies: minutes on a loaded machine.
pytestmark = pytest.mark.timeout(3 * INSTALL_TIMEOUT_S)


def run(*command: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(part) for part in command], cwd=cwd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S
    )
    assert done.returncode == 0, f"{' '.join(map(str, command))} failed:\n{done.stdout}\n{done.stderr}"
    return done


# What each package's wheel is built from: its folder, and the folders it takes sources from.
SOURCES = {"wakeup_admin": ("admin", "layers/wakeup/wakeup"), "wakeup_client": ("client",)}

# A package's wheel.
Wheel = Callable[[str], Path]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Wheel:
    """A package's wheel, built from copies of its sources laid out as in the repository, once a
    module: only the wheels a worker's tests ask for (the install tests run on workers of their own,
    each started with one)."""
    built: dict[str, Path] = {}

    def build(package: str) -> Path:
        if package not in built:
            sources = tmp_path_factory.mktemp("sources")
            for folder in SOURCES[package]:
                shutil.copytree(ROOT / folder, sources / folder, ignore=BUILD_LEFTOVERS)
            house = tmp_path_factory.mktemp("wheelhouse")
            run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", house, sources / SOURCES[package][0])
            [built[package]] = house.glob(f"{package}-*.whl")
        return built[package]

    return build


def pip(where: Path, *command: str | Path) -> subprocess.CompletedProcess[str]:
    """pip acting on the environment at `where` (pip's `--python`): this environment's pip, so that
    the fresh one needs no pip of its own, which `venv` would install and compile each time."""
    return run(sys.executable, "-m", "pip", "--python", where / "bin" / "python", *command)


def installed_alone(wheel: Path, where: Path) -> Path:
    """A fresh virtual environment with only `wheel` and what it depends on; its bin folder."""
    run(sys.executable, "-m", "venv", "--without-pip", where)
    pip(where, "install", "--quiet", "--no-compile", wheel)
    return where / "bin"


def metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(archive.read(name))


def distributions(where: Path) -> set[str]:
    listed = pip(where, "list", "--format=freeze").stdout
    return {line.split("==")[0].lower().replace("_", "-") for line in listed.splitlines() if "==" in line}


@pytest.mark.slow
@pytest.mark.parametrize(("package", "script"), [("wakeup_admin", "wakeup-admin"), ("wakeup_client", "wakeup-client")])
def test_each_package_installs_alone_without_the_local_stack_and_its_cli_runs(
    wheel: Wheel, tmp_path: Path, package: str, script: str
) -> None:
    bin_folder = installed_alone(wheel(package), tmp_path / "env")

    helped = run(bin_folder / script, "--help")

    assert helped.stdout.startswith(f"usage: {script} ")
    installed = distributions(tmp_path / "env")
    assert script in installed  # the listing is the fresh environment's, not an empty one
    assert not set(LOCAL_STACK) & installed


def test_the_client_says_what_it_is_and_pins_no_dependency_exactly(wheel: Wheel) -> None:
    found = metadata(wheel("wakeup_client"))

    assert found["Description-Content-Type"] == "text/markdown" and "wakeup-client" in found.get_payload()
    assert found["License-Expression"]
    assert "Typing :: Typed" in found.get_all("Classifier", [])
    requires = found.get_all("Requires-Dist", [])
    assert {r.split(">")[0].split("<")[0] for r in requires} == {"requests", "pydantic", "idna", "standardwebhooks"}
    assert all("==" not in r and "<" in r for r in requires)


def test_the_clients_cli_is_named_apart_from_other_tools(wheel: Wheel) -> None:
    with zipfile.ZipFile(wheel("wakeup_client")) as archive:
        [name] = [n for n in archive.namelist() if n.endswith("entry_points.txt")]
        scripts = archive.read(name).decode()

    assert "wakeup-client = wakeup_client.cli:main" in scripts
    assert "\nwakeup =" not in scripts
