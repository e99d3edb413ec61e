"""`ds4spec doctor`: the build evaluates tokens, and it says which backends it has and what they found."""

from __future__ import annotations

import subprocess
import sys

from ds4spec.faces.doctor import describe_backends


def test_doctor_evaluates_and_names_the_backends_of_this_build() -> None:
    proc = subprocess.run([sys.executable, "-m", "ds4spec", "doctor"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "evaluation OK" in proc.stdout
    [backends] = [line for line in proc.stdout.splitlines() if line.startswith("backends: ")]
    assert "CPU (1 device)" in backends  # a GPU build lists its GPU backend beside it


def test_a_gpu_backend_without_a_device_is_told_apart_from_a_gpu_in_use() -> None:
    assert describe_backends([("CPU", 1), ("CUDA", 0)]) == "CPU (1 device), CUDA (0 devices: no GPU or driver found)"
    assert describe_backends([("CUDA", 2), ("CPU", 1)]) == "CUDA (2 devices), CPU (1 device)"
    assert describe_backends([]) == "none reported"
