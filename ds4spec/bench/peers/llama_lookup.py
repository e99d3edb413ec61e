"""llama-cpp-python's own speculative decoding: ``LlamaPromptLookupDecoding`` (n-gram lookup in the context).

Its 0.3.36 release needs a workaround: with ``draft_model=`` it evaluates with per-token logits but sizes
its logits array for the last token only, and crashes, unless ``logits_all=True`` is also passed (field
notes, section 3). So this peer passes it, and pays what it costs: every evaluated row's logits are copied
into an ``n_ctx x n_vocab`` array. Drafts are target token ids, found in the prompt and the output so far.

llama-cpp-python does not count drafted or accepted tokens; the draft model here records each proposal and
where it was made, and after the run each is compared with the tokens that were actually generated there.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ds4spec.bench.peers.base import BenchTask, PeerResult
from ds4spec.bench.peers.llama_plain import LLAMA_PLAIN, LlamaPlainPeer

NUM_PRED_TOKENS = 10  # llama-cpp-python's default, and the value of the field notes' measurement
MAX_NGRAM_SIZE = 2  # its default


def _recording_lookup(num_pred_tokens: int, max_ngram_size: int) -> Any:
    """A ``LlamaPromptLookupDecoding`` that also keeps ``(position, draft)`` for every proposal it makes."""
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    class RecordingLookup(LlamaPromptLookupDecoding):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(max_ngram_size=max_ngram_size, num_pred_tokens=num_pred_tokens)
            self.proposals: list[tuple[int, list[int]]] = []

        def __call__(self, input_ids: npt.NDArray[np.intc], /, **kwargs: Any) -> npt.NDArray[np.intc]:
            draft = super().__call__(input_ids, **kwargs)
            # A copy: the draft is a view into llama-cpp-python's input buffer, which later tokens overwrite.
            self.proposals.append((int(input_ids.shape[0]), [int(t) for t in draft]))
            return draft

    return RecordingLookup()


class LlamaLookupPeer(LlamaPlainPeer):
    name = "llama.cpp prompt-lookup"
    family = "llama.cpp"
    baseline = LLAMA_PLAIN

    _lookup: Any = None

    def available(self) -> str | None:
        try:
            from llama_cpp.llama_speculative import LlamaPromptLookupDecoding  # noqa: F401
        except ImportError as exc:
            return f"llama-cpp-python has no prompt lookup decoding ({exc})"
        return super().available()

    def load(self) -> None:
        from llama_cpp import Llama

        from ds4spec.backend.runtime import init_llama

        init_llama()
        self._lookup = _recording_lookup(NUM_PRED_TOKENS, MAX_NGRAM_SIZE)
        self._llama = Llama(**self._llama_kwargs(), draft_model=self._lookup, logits_all=True)

    def run(self, task: BenchTask, max_tokens: int) -> PeerResult:
        prompt = task.prompt
        self._lookup.proposals.clear()
        rule, first = self._generate(prompt, max_tokens, task.stop)
        seconds = time.perf_counter() - first if first else 0.0
        drafted, accepted, passes = _score([*prompt, *rule.tokens], self._lookup.proposals)
        return PeerResult(rule.tokens, seconds, len(rule.tokens), rule.reason, drafted, accepted, passes)


def _score(sequence: Sequence[int], proposals: list[tuple[int, list[int]]]) -> tuple[int, int, int]:
    """Drafted, accepted and verify passes with a draft, over the part of ``sequence`` that was generated.

    A draft made at ``position`` proposes ``sequence[position:]``; it is accepted up to its first mismatch.
    Drafts past the end of the output (the last pass, cut by the token budget or a stop) count only as far
    as the output goes.
    """
    drafted = accepted = passes = 0
    for position, draft in proposals:
        actual = sequence[position: position + len(draft)]
        if not draft or not actual:
            continue
        draft = draft[: len(actual)]
        n = 0
        while n < len(draft) and draft[n] == actual[n]:
            n += 1
        drafted += len(draft)
        accepted += n
        passes += 1
    return drafted, accepted, passes
