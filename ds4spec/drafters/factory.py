"""From a ``--draft`` value to a drafter. New drafters plug in here; the engine never changes.

Model names are the engine's to resolve (``locate``): a drafter is built from a file, whatever store it came from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ds4spec.core.drafting import Drafter
from ds4spec.errors import UsageError

Backend = Literal["llama", "torch"]
KEYWORDS = ("none", "lookup", "hybrid")
# A model name or path -> its file, and the short name of a known model (smollm2-135m; None for a bare path).
Locate = Callable[[str], tuple[Path, str | None]]


@dataclass(frozen=True, slots=True)
class DrafterSpec:
    """What to build: ``draft`` is none, lookup, hybrid, a model name, a GGUF path or a transformers directory.

    ``model`` and ``backend`` name the model drafter for ``hybrid`` (and for a pair's default).
    """

    draft: str
    model: str | None = None
    backend: Backend = "llama"
    p_min: float = 0.3
    heal: bool = True
    n_ctx: int = 4096
    threads: int | None = 1  # a llama.cpp drafter's CPU threads (see ``engine.loading.drafter_threads``)
    # torch's: it keeps an OpenMP runtime of its own, whose idle threads would spin beside the target's steps
    torch_threads: int | None = 1
    gpu_layers: int | None = None
    mmap: bool | None = None  # see ``TargetOptions.mmap``


def build_drafter(spec: DrafterSpec, locate: Locate) -> Drafter | None:
    if spec.draft == "none":
        return None
    if spec.draft == "lookup":
        from ds4spec.drafters.lookup import LookupDrafter

        return LookupDrafter()
    if spec.draft == "hybrid":
        from ds4spec.drafters.hybrid import HybridDrafter
        from ds4spec.drafters.lookup import LookupDrafter

        if not spec.model:
            raise UsageError("--draft hybrid needs a model drafter: pass --pair or --draft-model")
        return HybridDrafter(LookupDrafter(), _model_drafter(spec.model, spec.backend, spec, locate))
    return _model_drafter(spec.draft, spec.backend, spec, locate)


def _model_drafter(name: str, backend: Backend, spec: DrafterSpec, locate: Locate) -> Drafter:
    directory = Path(name).expanduser()
    if directory.is_dir():  # a Hugging Face model directory: only transformers reads it
        from ds4spec.drafters.torch_drafter import TorchDrafter

        return TorchDrafter(directory, p_min=spec.p_min, n_threads=spec.torch_threads, heal=spec.heal)
    # A known model goes by its short manifest name (smollm2-135m), not by the long name inside its GGUF.
    path, known = locate(name)
    if backend == "torch":
        from ds4spec.drafters.torch_drafter import TorchDrafter

        return TorchDrafter(path, p_min=spec.p_min, n_threads=spec.torch_threads, name=known and f"torch:{known}",
                            heal=spec.heal)
    from ds4spec.drafters.llama_drafter import LlamaDrafter

    return LlamaDrafter(path, n_ctx=spec.n_ctx, p_min=spec.p_min, n_threads=spec.threads,
                        n_gpu_layers=spec.gpu_layers, name=known and f"llama:{known}", heal=spec.heal,
                        mmap=spec.mmap)
