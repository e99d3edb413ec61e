"""The target's tokenizer, on bytes: text in, token ids out, and back.

It works on bytes because a token may hold part of a UTF-8 character; decoded strings would lose that.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from ds4spec.backend.runtime import llama_cpp


@dataclass(frozen=True, slots=True)
class FimTokens:
    prefix: int
    suffix: int
    middle: int


class LlamaTokenizer:
    def __init__(self, vocab: llama_cpp.llama_vocab_p) -> None:
        self._vocab = vocab
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(vocab))
        self.bos = int(llama_cpp.llama_vocab_bos(vocab))
        self.eos = int(llama_cpp.llama_vocab_eos(vocab))
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(vocab))
        self.piece = lru_cache(maxsize=None)(self._piece)

    def tokenize(self, text: bytes, *, add_special: bool = False, parse_special: bool = False) -> list[int]:
        """Token ids for ``text``. With ``parse_special`` false, text such as ``<|im_end|>`` stays plain text.

        ``add_special`` adds the BOS token when the model asks for one.
        """
        n_max = len(text) + 8
        buf = (llama_cpp.llama_token * n_max)()
        n = llama_cpp.llama_tokenize(self._vocab, text, len(text), buf, n_max, add_special, parse_special)
        if n < 0:
            n_max = -n
            buf = (llama_cpp.llama_token * n_max)()
            n = llama_cpp.llama_tokenize(self._vocab, text, len(text), buf, n_max, add_special, parse_special)
        if n < 0:
            raise RuntimeError(f"llama.cpp could not tokenize {len(text)} bytes")
        return list(buf[:n])

    def detokenize(self, tokens: Sequence[int], *, special: bool = False) -> bytes:
        """The bytes of ``tokens`` in order; control tokens render as nothing unless ``special``."""
        if special:
            return b"".join(self._piece(t, special=True) for t in tokens)
        return b"".join(self.piece(t) for t in tokens)

    def _piece(self, token: int, special: bool = False) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, special)
        return buf.raw[:n]

    def is_eog(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))

    def is_control(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_control(self._vocab, token))

    def eog_tokens(self) -> frozenset[int]:
        return frozenset(t for t in range(self.n_vocab) if self.is_eog(t))

    def fim_tokens(self) -> FimTokens | None:
        """The fill-in-the-middle tokens, or None when the vocabulary lacks any of them."""
        ids = (
            int(llama_cpp.llama_vocab_fim_pre(self._vocab)),
            int(llama_cpp.llama_vocab_fim_suf(self._vocab)),
            int(llama_cpp.llama_vocab_fim_mid(self._vocab)),
        )
        if any(i < 0 for i in ids):
            return None
        return FimTokens(*ids)
