"""A drafter run by PyTorch through transformers: a Hugging Face model directory, or a GGUF file.

Why a second backend: transformers runs drafters that llama.cpp does not (new architectures, LoRA-merged
checkpoints), on CUDA or Apple MPS when present, and it dequantises GGUF files into torch models, so the
same small GGUF can drafted by either backend. Its KV cache (a ``DynamicCache``) is kept between cycles and
cropped on rollback, exactly like the llama.cpp drafter's.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ds4spec.backend.runtime import default_threads
from ds4spec.core.drafting import DraftContext
from ds4spec.core.messages import split_rendered
from ds4spec.drafters.model import ModelDrafter
from ds4spec.errors import ModelError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def auto_device() -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def _byte_level_decoder() -> dict[str, int]:
    """GPT-2's byte-to-character table, reversed: byte-level BPE pieces back to bytes."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    return table


class TorchDrafter(ModelDrafter):
    """Greedy drafts from a transformers causal LM (see :class:`ModelDrafter` for ``p_min``).

    ``model_dir_or_gguf``: a model directory, or a ``.gguf`` file (then ``gguf_file`` is its name), or a
    directory with ``gguf_file`` naming the file in it. ``device``: default CUDA, else MPS, else the CPU.
    ``dtype``: default float32 on the CPU (a GGUF is dequantised to it), float16 on a GPU. On the CPU it
    sets torch's thread count (process-wide) to ``n_threads`` or :func:`default_threads`. ``n_ctx``: the
    longest context it drafts in (default: the model's ``max_position_embeddings``); beyond it, no drafts.
    """

    def __init__(self, model_dir_or_gguf: Path | str, *, gguf_file: str | None = None,
                 device: str | torch.device | None = None, p_min: float = 0.3, dtype: torch.dtype | None = None,
                 n_threads: int | None = None, n_ctx: int | None = None, name: str | None = None,
                 lookback: int = 8, heal: bool = True) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

        source = Path(model_dir_or_gguf)
        if gguf_file is None and source.suffix == ".gguf":
            source, gguf_file = source.parent, source.name
        self.device = torch.device(device) if device is not None else auto_device()
        if self.device.type == "cpu":
            torch.set_num_threads(n_threads or default_threads())
        dtype = dtype or (torch.float32 if self.device.type == "cpu" else torch.float16)
        kwargs: dict[str, Any] = {"local_files_only": source.exists()}
        if gguf_file is not None:
            kwargs["gguf_file"] = gguf_file
        self.tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(source, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, **kwargs)
        self.model: PreTrainedModel = model.to(self.device).eval()
        self._new_cache = lambda: DynamicCache(config=self.model.config)
        self._cache = self._new_cache()
        self._held: list[int] = []  # the tokens the cache holds
        self.name = name or f"torch:{gguf_file or source.name}"
        self._n_ctx = n_ctx or getattr(self.model.config, "max_position_embeddings", None)
        self._stops = self._special_ids()
        decoder = getattr(getattr(self.tokenizer, "backend_tokenizer", None), "decoder", None)
        self._byte_level = decoder is not None and '"ByteLevel"' in decoder.__getstate__().decode()
        self._bytes_of = _byte_level_decoder() if self._byte_level else {}
        self._piece_cached = lru_cache(maxsize=None)(self._piece_uncached)
        super().__init__(p_min=p_min, lookback=lookback, heal=heal)

    @property
    def n_ctx(self) -> int | None:
        return self._n_ctx

    @property
    def n_vocab(self) -> int:  # the tokenizer's ids that the model's logits cover (a vocabulary may be padded)
        return min(len(self.tokenizer), int(self.model.config.vocab_size))

    def _special_ids(self) -> frozenset[int]:
        tok = self.tokenizer
        ids = set(tok.all_special_ids)
        ids.update(i for i, added in tok.added_tokens_decoder.items() if added.special)
        for config in (self.model.config, getattr(self.model, "generation_config", None)):
            eos = getattr(config, "eos_token_id", None)
            ids.update([eos] if isinstance(eos, int) else eos or [])
        return frozenset(ids)

    # -- tokenizer ---------------------------------------------------------------------------------------

    def _prompt(self, context: DraftContext) -> tuple[list[int], bytes]:
        if context.text is not None:
            with_special = self.tokenizer.encode("x", add_special_tokens=True)
            plain = self.tokenizer.encode("x", add_special_tokens=False)
            starts = [i for i in range(len(with_special)) if with_special[i : i + len(plain)] == plain]
            return with_special[: starts[0] if starts else 0], context.text
        return self._chat_tokens(context), b""

    def _chat_tokens(self, context: DraftContext) -> list[int]:
        """The model's chat template with an open assistant turn; message contents can never become markup.

        The markup is tokenized with special tokens parsed, each content with ``split_special_tokens=True``
        (``split_rendered``, as ``prompt.chat_tokens`` does).
        """
        if not self.tokenizer.chat_template:
            raise ModelError(f"{self.name} has no chat template")
        pieces, rest = split_rendered(
            context.messages or (),
            lambda keyed, _tools: self.tokenizer.apply_chat_template(keyed, tokenize=False, add_generation_prompt=True),
        )
        out: list[int] = []
        for before, content in pieces:
            out += self.tokenizer.encode(before, add_special_tokens=False)
            out += self.tokenizer.encode(content, add_special_tokens=False, split_special_tokens=True)
        return out + self.tokenizer.encode(rest, add_special_tokens=False)

    def _tokenize_text(self, text: bytes) -> list[int]:
        string = text.decode("utf-8", errors="replace")  # valid already: TokenSync cuts at characters
        return self.tokenizer.encode(string, add_special_tokens=False, split_special_tokens=True)

    def _piece(self, token: int) -> bytes:
        return self._piece_cached(token)

    def _piece_uncached(self, token: int) -> bytes:
        """A token's bytes, also for tokens that hold part of a UTF-8 character (``decode`` cannot say)."""
        piece = self.tokenizer.convert_ids_to_tokens(token)
        if token in self._stops or piece is None:
            return b""
        if self._byte_level and all(c in self._bytes_of for c in piece):
            return bytes(self._bytes_of[c] for c in piece)
        if match := _BYTE_TOKEN.fullmatch(piece):  # SentencePiece byte fallback
            return bytes([int(match.group(1), 16)])
        return piece.replace("\u2581", " ").encode("utf-8")

    def _is_stop(self, token: int) -> bool:
        return token in self._stops

    # -- model -------------------------------------------------------------------------------------------

    def _cache_tail(self, start: int) -> list[int]:
        return self._held[start:]

    def _cache_len(self) -> int:
        return len(self._held)

    def _truncate(self, n: int) -> None:
        drop = len(self._held) - n
        if drop <= 0:
            return
        if n == 0:
            self._cache = self._new_cache()
        else:
            self._cache.crop(-drop)  # transformers 5: a negative count of tokens to remove
        del self._held[n:]

    def _forward(self, tokens: list[int], rows: int) -> np.ndarray:
        ids = torch.tensor([tokens], dtype=torch.long, device=self.device)
        try:
            with torch.inference_mode():
                logits = self.model(input_ids=ids, past_key_values=self._cache, use_cache=True,
                                    logits_to_keep=rows).logits[0].float()
        except BaseException:
            self._resync()
            raise
        self._held += tokens
        return logits.cpu().numpy()

    def _resync(self) -> None:
        """After a failed forward pass, drops whatever the cache took beyond our record of it."""
        held = self._cache.get_seq_length()
        if held > len(self._held):
            self._cache.crop(-(held - len(self._held)))

    def close(self) -> None:
        self._cache = self._new_cache()
        self._held.clear()
