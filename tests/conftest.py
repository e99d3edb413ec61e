"""Shared fixtures: tiny GGUF models, and a DS4SPEC_HOME that keeps tests away from the user's real data."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tinymodel import build_tiny_gguf

_REAL_TESTS = Path(__file__).resolve().parent / "real"
# The x86 extensions that change llama.cpp's kernels, and so its timings and near-tie flips.
_SIMD_FLAGS = ("avx", "avx2", "fma", "f16c", "bmi2", "avx_vnni", "avx512f", "avx512bw", "avx512dq", "avx512vl",
               "avx512_vnni", "avx512_bf16", "amx_tile")


def pytest_report_header() -> list[str]:
    """Names the machine a failure happened on: machines differ (AVX2-only and AVX-512), and so do the kernels."""
    model, flags = "unknown", set()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown":
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    from ds4spec.backend.runtime import system_info

    simd = " ".join(f for f in _SIMD_FLAGS if f in flags) or "none listed"
    return [f"cpu: {model}, {os.cpu_count()} cores; extensions: {simd}", f"llama.cpp build: {system_info()}"]


@pytest.fixture(scope="session")
def tiny_bpe_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Qwen-like byte-level BPE model, built once per session (it takes milliseconds, but why repeat it)."""
    return build_tiny_gguf(tmp_path_factory.mktemp("tiny-models") / "tiny-bpe.gguf", tokenizer="bpe")


@pytest.fixture(scope="session")
def tiny_spm_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Llama-2-like SentencePiece model with byte fallback: the other tokenizer family to bridge."""
    return build_tiny_gguf(tmp_path_factory.mktemp("tiny-models") / "tiny-spm.gguf", tokenizer="spm")


@pytest.fixture(scope="session")
def tiny_models(tiny_bpe_gguf: Path, tiny_spm_gguf: Path) -> dict[str, Path]:
    """Both tiny models by tokenizer kind, for tests that pair a target with a drafter of another family."""
    return {"bpe": tiny_bpe_gguf, "spm": tiny_spm_gguf}


@pytest.fixture(scope="session")
def isolated_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One throw-away DS4SPEC_HOME for the session, so that no test reads or writes the user's models."""
    return tmp_path_factory.mktemp("ds4spec-home")


@pytest.fixture(autouse=True)
def _use_isolated_home(request: pytest.FixtureRequest) -> Iterator[None]:
    """Point DS4SPEC_HOME at ``isolated_home`` for every test except those in tests/real.

    Tests in tests/real use the real default models, which ``scripts/setup.sh test`` pulled into the
    user's data directory, so they keep the environment as it is. The variable is restored after each test.
    """
    if _REAL_TESTS in Path(request.path).resolve().parents:
        yield
        return
    home = request.getfixturevalue("isolated_home")
    saved = os.environ.get("DS4SPEC_HOME")
    os.environ["DS4SPEC_HOME"] = str(home)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("DS4SPEC_HOME", None)
        else:
            os.environ["DS4SPEC_HOME"] = saved
