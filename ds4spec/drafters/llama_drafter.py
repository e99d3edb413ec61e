"""A drafter that is any GGUF model run by llama.cpp, with its own tokenizer, context and chat template.

It reuses :class:`ds4spec.backend.target.LlamaTarget` as a plain llama.cpp sequence (exact rollback, logits of the
last position only), so the drafter gets the same build, threading and GPU offload as the target.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from ds4spec.backend.prompt import chat_tokens
from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.target_options import TargetOptions
from ds4spec.core.drafting import DraftContext
from ds4spec.drafters.model import ModelDrafter


class LlamaDrafter(ModelDrafter):
    """Greedy drafts from a small GGUF model (the default is SmolLM2-135M-Instruct).

    ``path_or_target``: a GGUF path, or an open :class:`LlamaTarget` to draft with (it is then not closed by
    :meth:`close`; whoever opened it owns it). ``n_ctx`` and ``n_threads`` apply to a model opened here.
    ``p_min``: see :class:`ModelDrafter` (the first token is always proposed; later ones need ``p_min``).
    A full context gives no drafts, never an error: the drafter is an optional helper.
    """

    def __init__(self, path_or_target: Path | str | LlamaTarget, *, n_ctx: int = 4096, p_min: float = 0.3,
                 n_threads: int | None = None, n_gpu_layers: int | None = None, name: str | None = None,
                 lookback: int = 8, heal: bool = True, mmap: bool | None = None) -> None:
        if isinstance(path_or_target, LlamaTarget):
            self._model, self._owned = path_or_target, False
        else:
            options = TargetOptions(n_ctx=n_ctx, n_threads=n_threads, n_gpu_layers=n_gpu_layers, mmap=mmap)
            self._model, self._owned = LlamaTarget(path_or_target, options), True
        self._tok = self._model.tokenizer
        self.name = name or f"llama:{self._model.name}"
        self._stop = lru_cache(maxsize=None)(self._stop_uncached)
        super().__init__(p_min=p_min, lookback=lookback, heal=heal)

    @property
    def model(self) -> LlamaTarget:
        return self._model

    @property
    def n_ctx(self) -> int:
        return self._model.n_ctx

    @property
    def n_vocab(self) -> int:
        return self._model.n_vocab

    def _prompt(self, context: DraftContext) -> tuple[list[int], bytes]:
        tok = self._tok
        head = [tok.bos] if tok.add_bos and tok.bos >= 0 else []  # what add_special=True puts before the text
        if context.text is not None:
            return head, context.text
        bos = tok.detokenize(head, special=True).decode("utf-8", errors="replace")
        eos = tok.detokenize([tok.eos], special=True).decode("utf-8", errors="replace") if tok.eos >= 0 else ""
        messages = context.messages or ()
        return chat_tokens(tok, self._model.chat_template, messages, bos=bos, eos=eos), b""

    def _tokenize_text(self, text: bytes) -> list[int]:
        return self._tok.tokenize(text, add_special=False, parse_special=False)

    def _piece(self, token: int) -> bytes:
        return self._tok.piece(token)

    def _is_stop(self, token: int) -> bool:
        return self._stop(token)

    def _stop_uncached(self, token: int) -> bool:
        return self._tok.is_eog(token) or self._tok.is_control(token)

    def _cache_tail(self, start: int) -> list[int]:
        return self._model.recent_tokens(self._model.n_past - start)

    def _cache_len(self) -> int:
        return self._model.n_past

    def _truncate(self, n: int) -> None:
        self._model.rollback(n)

    def _forward(self, tokens: list[int], rows: int) -> np.ndarray:
        return self._model.eval_tail(tokens, rows)

    def close(self) -> None:
        if self._owned:
            self._model.close()
