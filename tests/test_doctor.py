"""`ds4spec doctor`: the build evaluates tokens, and it says which backends it has and what they found."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ds4spec.backend.huge_pages import environment_with_huge_pages, glibc_version, thp_mode
from ds4spec.faces.doctor import describe_backends, describe_huge_pages, describe_weights


@pytest.fixture(scope="module")
def doctor() -> subprocess.CompletedProcess[str]:
    """One run of ``ds4spec doctor`` (a tiny model built and evaluated in a child process) for the tests below."""
    return subprocess.run([sys.executable, "-m", "ds4spec", "doctor"], capture_output=True, text=True, timeout=300)


def test_doctor_evaluates_and_names_the_backends_of_this_build(doctor: subprocess.CompletedProcess[str]) -> None:
    proc = doctor
    assert proc.returncode == 0, proc.stderr
    assert "evaluation OK" in proc.stdout
    [backends] = [line for line in proc.stdout.splitlines() if line.startswith("backends: ")]
    assert "CPU (1 device)" in backends  # a GPU build lists its GPU backend beside it


def test_a_gpu_backend_without_a_device_is_told_apart_from_a_gpu_in_use() -> None:
    assert describe_backends([("CPU", 1), ("CUDA", 0)]) == "CPU (1 device), CUDA (0 devices: no GPU or driver found)"
    assert describe_backends([("CUDA", 2), ("CPU", 1)]) == "CUDA (2 devices), CPU (1 device)"
    assert describe_backends([]) == "none reported"


def test_doctor_says_whether_the_models_memory_may_be_on_huge_pages(
    doctor: subprocess.CompletedProcess[str],
) -> None:
    [line] = [line for line in doctor.stdout.splitlines() if line.startswith("huge pages: ")]
    assert line == f"huge pages: {describe_huge_pages(os.environ | restarted_environment(), thp_mode())}"


@pytest.mark.parametrize(("env", "mode", "says"), [
    ({}, None, "the kernel has no transparent huge pages"),
    ({}, "always", "the kernel's transparent huge pages are 'always': nothing to ask for"),
    ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}, "madvise",
     "asked for (GLIBC_TUNABLES=glibc.malloc.hugetlb=1; the kernel gives them on request)"),
    ({"DS4SPEC_HUGE_PAGES": "0"}, "madvise",
     "not asked for (DS4SPEC_HUGE_PAGES=0; the kernel gives them only on request)"),
    ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}, "madvise",
     "not asked for (GLIBC_TUNABLES=glibc.malloc.hugetlb=0; the kernel gives them only on request)"),
], ids=["no-thp", "always", "asked", "opted-out", "users-own-setting"])
def test_the_huge_pages_line_names_what_decided(env: dict[str, str], mode: str | None, says: str) -> None:
    assert describe_huge_pages(env, mode) == says


def test_doctor_says_where_a_model_on_the_cpu_keeps_its_weights(doctor: subprocess.CompletedProcess[str]) -> None:
    [line] = [line for line in doctor.stdout.splitlines() if line.startswith("weights on the CPU: ")]
    assert line == f"weights on the CPU: {describe_weights(os.environ | restarted_environment(), thp_mode())}"


@pytest.mark.parametrize(("env", "mode", "read"), [
    ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}, "madvise", True), ({}, "always", True), ({}, "madvise", False),
    ({}, None, False),
], ids=["asked", "always", "not-asked", "no-thp"])
def test_the_weights_line_says_read_only_where_huge_pages_receive_them(env: dict[str, str], mode: str | None,
                                                                        read: bool) -> None:
    assert describe_weights(env, mode).startswith("read into memory") is read


def restarted_environment() -> dict[str, str]:
    """What ``restart_with_huge_pages`` adds to this environment on this machine (nothing where it does not restart)."""
    return environment_with_huge_pages(os.environ, thp_mode(), glibc_version()) or {}
