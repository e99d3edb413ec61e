"""What every peer system of ``ds4spec bench --peers`` is, and the output rule they all share.

A peer is another system that runs the same target GGUF file on the same prompt tokens: llama.cpp's plain
decoding, llama-cpp-python's prompt lookup, transformers with and without an assistant model. To compare
speed and output fairly, every peer ends its output exactly where ds4spec's plain decoding would: at an
end-of-generation token, right after the token that completes a stop string, or at the token budget. So
each peer feeds its tokens to ds4spec's own ``OutputStream``, with the target vocabulary read from the GGUF
file (:class:`TargetVocab`), instead of relying on its own, slightly different, stop handling.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ds4spec.backend.runtime import gpu_offload_supported, init_llama, llama_cpp
from ds4spec.backend.target import model_metadata
from ds4spec.backend.tokenizer import LlamaTokenizer
from ds4spec.core.events import FinishReason, Provenance
from ds4spec.core.messages import ChatMessage
from ds4spec.core.plain import GenerationRequest, OutputStream
from ds4spec.core.stats import GenerationStats
from ds4spec.errors import ModelError


@dataclass(frozen=True, slots=True)
class PeerResult:
    """One generation by one system (a peer, or a ds4spec mode converted to the same shape).

    ``seconds`` is generation time after the prompt, as ds4spec's ``generation_seconds``: from the moment
    the first token is known to the end; ``timed_tokens`` are the tokens that time is credited with
    (see each peer for how it finds the moment). ``drafted``/``accepted``/``passes_with_draft`` are None
    for a system that does not draft or does not say.
    """

    tokens: tuple[int, ...]
    seconds: float
    timed_tokens: int
    finish: str
    drafted: int | None = None
    accepted: int | None = None
    passes_with_draft: int | None = None


@dataclass(frozen=True, slots=True)
class BenchTask:
    """One prompt as every system receives it: the target's token ids and the stop strings, and what they were
    made from (the raw text of a completion prompt, or the chat turns), for a peer that renders prompts itself."""

    workload: str
    task_id: str
    prompt: tuple[int, ...]
    stop: tuple[str, ...]
    text: str | None = None
    messages: tuple[ChatMessage, ...] = ()


@dataclass(frozen=True, slots=True)
class PeerSetup:
    """What the bench hands every peer: the same files and limits its own target uses."""

    target: Path  # the target GGUF file
    vocab: LlamaTokenizer  # the target's vocabulary, for the shared output rule
    n_ctx: int
    n_batch: int
    threads: int | None  # None: the peer's own default
    gpu_layers: int | None  # None: all layers when llama.cpp has GPU support
    drafter: str | None  # the pair's model drafter (name, GGUF path or transformers directory), if any
    drafter_problem: str | None = None  # why there is no model drafter, when there is none
    # A drafter with the target's own vocabulary, for llama.cpp's draft modes (they refuse another vocabulary).
    family_drafter: Path | None = None
    family_drafter_problem: str | None = None  # why there is none
    mmap: bool | None = None  # ds4spec's --mmap: the in-process llama.cpp peers load the target as ds4spec does

    def layers_on_gpu(self, every: int) -> int:
        """``gpu_layers``, or ``every`` (the peer's word for all layers) when unset and llama.cpp can offload."""
        if self.gpu_layers is not None:
            return self.gpu_layers
        return every if gpu_offload_supported() else 0


class Peer(abc.ABC):
    """A system to compare with. ``available`` must be cheap and never raise: it says why not, or None."""

    name: str  # shown in the tables, e.g. "llama.cpp plain"
    family: str  # "llama.cpp" or "transformers": whose plain run is its own baseline
    baseline: str  # the name of the plain system of its family

    def __init__(self, setup: PeerSetup) -> None:
        self.setup = setup

    @abc.abstractmethod
    def available(self) -> str | None: ...

    @abc.abstractmethod
    def load(self) -> None: ...

    @abc.abstractmethod
    def run(self, task: BenchTask, max_tokens: int) -> PeerResult:
        """Greedy generation from the target token ids ``task.prompt``."""

    def close(self) -> None:  # noqa: B027 - a peer with nothing to free keeps the default
        pass


class OutputRule:
    """ds4spec's plain-decoding end rule, fed one token at a time by a peer."""

    def __init__(self, vocab: LlamaTokenizer, prompt: Sequence[int], max_tokens: int, stop: Sequence[str]) -> None:
        self._out = OutputStream(vocab, GenerationRequest(prompt, max_tokens, stop=tuple(stop)), GenerationStats())
        self.finish: FinishReason | None = None

    def add(self, token: int) -> bool:
        """Takes ``token``; True once the output is complete (later tokens are ignored)."""
        if self.finish is None:
            _, self.finish = self._out.commit(token, Provenance.TARGET)
        return self.finish is not None

    def stop_at_context(self) -> None:
        self.finish = self.finish or FinishReason.CONTEXT

    @property
    def tokens(self) -> tuple[int, ...]:
        return tuple(self._out.tokens)

    @property
    def reason(self) -> str:
        return (self.finish or FinishReason.LENGTH).value


class TargetVocab:
    """The target GGUF's vocabulary alone, no weights: the output rule for peers that have no llama.cpp."""

    def __init__(self, path: Path) -> None:
        init_llama()
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        model = llama_cpp.llama_model_load_from_file(str(path).encode("utf-8"), params)
        if not model:
            raise ModelError(f"llama.cpp could not read the vocabulary of {path}")
        self._model = model
        self.tokenizer = LlamaTokenizer(llama_cpp.llama_model_get_vocab(model))
        self.metadata = model_metadata(model)

    def close(self) -> None:
        model, self._model = self._model, None
        if model:
            llama_cpp.llama_model_free(model)

    def __enter__(self) -> TargetVocab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
