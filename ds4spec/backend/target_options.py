"""How a target is loaded: context, threads, GPU layers, batch. Apart from ``target`` so that settings and options
can name them without loading llama.cpp."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TargetOptions:
    n_ctx: int = 4096
    n_threads: int | None = None  # None: ds4spec.backend.runtime.default_threads()
    n_gpu_layers: int | None = None  # None: every layer on a GPU or Metal when present, else 0
    n_batch: int = 512  # the longest span one forward pass takes; prompts are fed in chunks of this
    force_snapshots: bool = False  # use state snapshots even where the memory could drop a tail (tests)
    # Start the next plain step before the bookkeeping of the last: None where a pass is measured to run beside the
    # caller (a GPU), True to do it anyway (tests on a CPU), False never.
    launch_ahead: bool | None = None
    # Compute from the file's mapping (True) or read the weights into memory (False); None: read them where that pays
    # (``ds4spec.backend.weights_memory``).
    mmap: bool | None = None
