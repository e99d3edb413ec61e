"""A wheel of ds4spec works away from the checkout: it carries the model manifests and the trigger rules, and
an installed ds4spec finds them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("models", "triggers")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy: setuptools writes build/ and *.egg-info beside the sources, and a stale build/ in
    # the checkout could slip removed files into the wheel.
    source = tmp_path_factory.mktemp("source")
    for part in ("pyproject.toml", "README.md", "ds4spec", *SHIPPED):
        if (ROOT / part).is_dir():
            shutil.copytree(ROOT / part, source / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / part, source / part)
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(out), str(source)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    (built,) = out.glob("ds4spec-*.whl")
    return built


def test_the_wheel_carries_every_manifest_and_every_trigger_rule_file(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    for folder in SHIPPED:
        shipped = {p.name for p in (ROOT / folder).iterdir() if p.suffix in (".toml", ".md")}
        in_wheel = {n.rsplit("/", 1)[1] for n in names if f"/data/share/ds4spec/{folder}/" in n}
        assert shipped and in_wheel == shipped, folder


def test_an_installed_wheel_finds_its_manifests_and_rules(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    # The dependencies come from the test environment; ds4spec itself only from the wheel.
    (purelib / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True)
    env = {**os.environ, "DS4SPEC_HOME": str(tmp_path / "home")}
    env.pop("PYTHONPATH", None)
    check = ("import ds4spec, sys; from ds4spec.policy.rules import load_rulebook; "
             "from ds4spec.store.manifests import load_pairs; "
             "print(ds4spec.__file__); print(sorted(load_rulebook().families)); print(sorted(load_pairs()))")
    proc = subprocess.run([str(python), "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    where, families, pairs = proc.stdout.splitlines()
    assert Path(where).is_relative_to(venv)  # the wheel's copy, not the checkout's
    assert "'python'" in families and "'default'" in families
    assert pairs != "[]"
    listed = subprocess.run([str(venv / "bin" / "ds4spec"), "models", "list"], cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    assert listed.returncode == 0 and "qwen2.5-coder-1.5b" in listed.stdout, listed.stderr
