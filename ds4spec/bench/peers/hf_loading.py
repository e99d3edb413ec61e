"""Loading the bench's models into transformers: the target from the same GGUF file llama.cpp runs, the drafter
from its GGUF file or model directory.

transformers dequantises a GGUF file into a full-precision torch model (the 1.5B target becomes about 6 GB
of float32). On the CPU float32 it stays: bfloat16 measured twice as slow per token on this project's 2-core
x86-64 machine (1.6 s against 3.2 s per token while the machine was busy; same greedy tokens). On a GPU the
target runs in bfloat16.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

REQUIRED = ("torch", "transformers", "gguf", "accelerate")


def missing_packages() -> str | None:
    """Why transformers cannot load a GGUF file here, or None when it can."""
    missing = [name for name in REQUIRED if importlib.util.find_spec(name) is None]
    return f"not installed: {', '.join(missing)}" if missing else None


@dataclass(slots=True)
class HfModel:
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    device: torch.device


def _device_and_dtype() -> tuple[torch.device, torch.dtype]:
    import torch

    from ds4spec.drafters.torch_drafter import auto_device

    device = auto_device()
    dtype = {"cpu": torch.float32, "cuda": torch.bfloat16}.get(device.type, torch.float16)
    return device, dtype


def load_hf_model(source: Path, threads: int | None = None) -> HfModel:
    """A causal LM and its tokenizer from a ``.gguf`` file or a transformers model directory, offline."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from ds4spec.backend.runtime import default_threads

    # Its loading bars would bury the bench's own lines (the GGUF de-quantisation bar is plain tqdm and stays).
    hf_logging.disable_progress_bar()
    device, dtype = _device_and_dtype()
    if device.type == "cpu":
        torch.set_num_threads(threads or default_threads())
    kwargs: dict[str, Any] = {"local_files_only": True}
    directory = source
    if source.suffix == ".gguf":
        directory, kwargs["gguf_file"] = source.parent, source.name
    tokenizer = AutoTokenizer.from_pretrained(directory, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=dtype, **kwargs)
    return HfModel(model.to(device).eval(), tokenizer, device)
