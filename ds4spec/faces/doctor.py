"""``ds4spec doctor``: proves that this llama.cpp build really evaluates tokens on this machine.

A build for the wrong CPU does not fail at import; it dies at the first evaluation (field notes: an AMX
instruction in a native build faults). So the check builds a tiny model, evaluates a span, rolls back and
evaluates again, and compares. Run it in a child process so that a crash is reported, not suffered.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ds4spec import __version__
from ds4spec.backend.huge_pages import OPT_OUT, TUNABLE, anonymous_huge_pages, huge_pages_asked, thp_mode
from ds4spec.errors import Ds4Error


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "doctor",
        help="check that llama.cpp evaluates tokens on this machine",
        description="Builds a tiny model, evaluates it with llama.cpp in a child process, and reports.",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    proc = subprocess.run([sys.executable, "-m", "ds4spec.faces.doctor"], capture_output=True, text=True)
    sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        how = f"crashed with signal {-proc.returncode}" if proc.returncode < 0 else "failed"
        raise Ds4Error(
            f"llama.cpp {how} evaluating a tiny model; rebuild it with scripts/setup.sh install "
            "(see docs/setup.md, 'Building llama.cpp')"
        )
    print(proc.stdout, end="")
    return 0


def check() -> str:
    """Runs the evaluation check in this process; returns a report or raises AssertionError."""
    import llama_cpp

    from ds4spec.backend.runtime import compiled_backends, system_info
    from ds4spec.backend.target import LlamaTarget
    from ds4spec.backend.target_options import TargetOptions
    from ds4spec.faces.doctor_model import build_doctor_model

    with tempfile.TemporaryDirectory() as tmp:
        path = build_doctor_model(Path(tmp) / "doctor.gguf")
        with LlamaTarget(path, TargetOptions(n_ctx=128, n_gpu_layers=0)) as target:
            tokens = target.tokenizer.tokenize(b"def main():\n    return 42\n")
            first = target.eval_span(tokens)
            target.rollback(0)
            again = target.eval_span(tokens)
            assert np.all(np.isfinite(first)), "llama.cpp returned non-finite logits"
            assert first.std() > 0, "llama.cpp returned constant logits"
            assert np.allclose(first, again, atol=1e-4), "rollback did not reproduce the logits"
    return (
        f"ds4spec {__version__}, llama-cpp-python {llama_cpp.__version__}: evaluation OK "
        f"({len(tokens)} tokens, one span, rollback reproduces the logits)\n"
        f"GPU offload: {'yes' if llama_cpp.llama_supports_gpu_offload() else 'no'}\n"
        f"backends: {describe_backends(compiled_backends())}\n"
        f"huge pages: {describe_huge_pages(os.environ, thp_mode())}\n"
        f"weights on the CPU: {describe_weights(os.environ, thp_mode())}\n"
        f"{system_info()}\n"
    )


def describe_huge_pages(env: Mapping[str, str], mode: str | None) -> str:
    """Whether the models' memory may be on transparent huge pages (``ds4spec.backend.huge_pages``)."""
    tunables = env.get("GLIBC_TUNABLES", "")
    if mode is None:
        return "the kernel has no transparent huge pages"
    if mode != "madvise":
        return f"the kernel's transparent huge pages are {mode!r}: nothing to ask for"
    if huge_pages_asked(env):
        return f"asked for (GLIBC_TUNABLES={tunables}; the kernel gives them on request)"
    why = f"{OPT_OUT}=0" if env.get(OPT_OUT) == "0" else f"GLIBC_TUNABLES={tunables}" if TUNABLE in tunables else (
        "not restarted by the ds4spec command, or not glibc 2.35 or later")
    return f"not asked for ({why}; the kernel gives them only on request)"


def describe_weights(env: Mapping[str, str], mode: str | None) -> str:
    """Where a model run on the CPU keeps its weights by default (``ds4spec.backend.weights_memory``)."""
    if anonymous_huge_pages(env, mode):
        return ("read into memory, on huge pages, when the file fits in half of the free memory (--mmap maps it; "
                "`complete` maps it unless told --no-mmap)")
    return "computed from the file's mapping (no huge pages to read them into; --no-mmap reads them)"


def describe_backends(backends: list[tuple[str, int]]) -> str:
    """``CPU (1 device), CUDA (0 devices: no GPU or driver found)``: a GPU build is told from a GPU in use."""
    def one(name: str, devices: int) -> str:
        plural = "device" if devices == 1 else "devices"
        return f"{name} ({devices} {plural}{': no GPU or driver found' if not devices else ''})"

    return ", ".join(one(name, n) for name, n in backends) or "none reported"


if __name__ == "__main__":
    print(check(), end="")
