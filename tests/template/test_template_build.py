"""`make build`: `sam build` of template.yaml with no Docker, for Python 3.13 on arm64.

The build test installs aws-sam-cli into `.venv-sam` when it is missing (PyPI) and downloads the
layer's aarch64 wheels, so it takes from about 15 s to a minute.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cfn_template import REPO

HANDLERS = {
    "InstancesFunction": "instances_handler.py",
    "WakeFunction": "wake_handler.py",
    "CallerFunction": "caller_handler.py",
    "SweeperFunction": "sweeper_handler.py",
    "PlannerFunction": "planner_handler.py",
}


def make_build(tmp_path: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "make",
            "--no-print-directory",
            "build",
            f"SAM_BUILD_DIR={tmp_path / 'build'}",
            f"SAM_CACHE_DIR={tmp_path / 'cache'}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_make_build_builds_the_layer_for_arm64_and_every_function(tmp_path: Path) -> None:
    result = make_build(tmp_path)

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    built = tmp_path / "build"
    layer = built / "WakeupLayer" / "python"
    assert (built / "template.yaml").is_file()
    assert (layer / "wakeup" / "__init__.py").is_file()
    assert list(layer.glob("pydantic_core/_pydantic_core.cpython-313-aarch64-linux-gnu*.so"))
    assert (layer / "aws_lambda_powertools").is_dir()
    assert (layer / "aws_xray_sdk").is_dir()
    assert {name: (built / name / handler).is_file() for name, handler in HANDLERS.items()} == dict.fromkeys(
        HANDLERS, True
    )


def test_make_build_says_what_to_install_without_python313(tmp_path: Path) -> None:
    # given: a PATH with the system's commands but no python3.13 and no pyenv, and a home with no
    # ~/.pyenv (made on any machine: the commands of /usr/bin and /bin, python3.13 left out)
    commands = tmp_path / "bin"
    commands.mkdir()
    for directory in (Path("/usr/bin"), Path("/bin")):
        for command in directory.iterdir():
            if not command.name.startswith(("python3.13", "pyenv")) and not (commands / command.name).exists():
                (commands / command.name).symlink_to(command)
    env = {"PATH": str(commands), "HOME": str(tmp_path), "PYENV_ROOT": str(tmp_path / "no-pyenv")}

    # when
    result = make_build(tmp_path, env)

    # then: it stops before installing anything, and says what to install
    assert result.returncode != 0
    assert "needs Python 3.13" in result.stderr
    assert "pyenv install 3.13" in result.stderr
    assert "pip install" not in result.stdout + result.stderr
