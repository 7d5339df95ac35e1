"""The Makefile builds the venv from Debian's interpreter when it can, and `make bench` runs every
benchmark the README's performance table quotes (README, "Performance")."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

DEBIAN_PYTHON = Path("/usr/bin/python3.11")

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def make(*args: str, env: dict[str, str] | None = None) -> str:
    """What `make ARGS` prints in the project's directory."""
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout


def make_python(*args: str) -> str:
    """The interpreter `make` would build the venv from."""
    shown = make(
        "-s",
        "--eval",
        "show-python: ; @echo $(PYTHON)",
        *args,
        "show-python",
        env={"PATH": "/usr/bin:/bin"},  # no PYTHON from the environment
    )
    return shown.strip()


def can_build_a_venv(python: Path) -> bool:
    if not python.exists():
        return False
    return subprocess.run([python, "-c", "import ensurepip"], capture_output=True).returncode == 0


def test_the_venv_comes_from_debians_python_when_it_can_build_one() -> None:
    expected = str(DEBIAN_PYTHON) if can_build_a_venv(DEBIAN_PYTHON) else "python3.11"
    assert make_python() == expected


def test_python_on_the_command_line_overrides_it() -> None:
    assert make_python("PYTHON=/opt/python3.11/bin/python3.11") == "/opt/python3.11/bin/python3.11"


def test_make_bench_runs_every_benchmark_the_readmes_performance_table_quotes() -> None:
    readme = (settings.BASE_DIR / "README.md").read_text()
    section = readme.split("\n## Performance\n", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("| **")]
    quoted = [match[1] for row in table if (match := re.search(r"\(`(bench_[a-z]+ [^`]*)`\)", row))]
    assert len(quoted) == len(table) == 4  # load at 2 s, load at no delay, push, checkpoints
    planned = make("-n", "bench")
    for command in quoted:
        assert f"manage.py {command} --json" in planned
