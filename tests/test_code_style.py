"""The repository stays ruff-clean, the package, the tests and the measuring aids alike: the check runs with the
suite so that CI enforces it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing_to_fix() -> None:
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
