"""The drafter llama.cpp's draft modes get: a model with the target's own vocabulary (Qwen2.5-Coder-0.5B for a
Qwen target), since llama.cpp refuses a drafter of another family, which is what ds4spec's pair uses."""

from __future__ import annotations

from pathlib import Path

from ds4spec.errors import Ds4Error
from ds4spec.store.local import model_path, model_status, resolve_model
from ds4spec.store.manifests import Manifest, load_manifests


def family_drafter(target: Path, target_tokenizer: str, target_vocab: int,
                   named: str | None = None) -> tuple[Path | None, str | None]:
    """``named`` (a model name or GGUF path) if given; else the smallest verified model whose manifest has the
    target's tokenizer and vocabulary size and other base weights than the target's. Returns it, or why none."""
    if named:
        try:
            return resolve_model(named).path, None
        except Ds4Error as exc:
            return None, str(exc)
    manifests = load_manifests().values()
    own = next((m for m in manifests if model_path(m) == target), None)
    candidates = [m for m in manifests if _same_vocabulary(m, target_tokenizer, target_vocab) and m is not own
                  and not (own and own.base_model and m.base_model == own.base_model)]
    ready = sorted((m for m in candidates if model_status(m) == "verified"), key=lambda m: m.size)
    if ready:
        return model_path(ready[0]), None
    if candidates:
        smallest = min(candidates, key=lambda m: m.size)
        return None, f"no drafter with the target's vocabulary is pulled: ds4spec models pull {smallest.name}"
    return None, (f"no known model shares the target's vocabulary ({target_tokenizer}, {target_vocab} tokens); "
                  "name one with --peer-draft")


def _same_vocabulary(m: Manifest, tokenizer: str, vocab: int) -> bool:
    return m.tokenizer == tokenizer and (m.vocab_size is None or m.vocab_size == vocab)
