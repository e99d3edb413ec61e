"""The target model: a GGUF file evaluated by llama.cpp, one sequence, with exact rollback.

Contract that speculative verification stands on:

- ``eval_span(tokens)`` evaluates a span in ONE forward pass and returns the logits of every position of
  the span (row i predicts the token after ``tokens[i]``). Only those rows are computed and copied: no
  ``logits_all`` array of n_ctx x n_vocab.
- ``eval_span_view(tokens)`` is the same pass, its rows left where llama.cpp wrote them (not to be written, valid
  until the next pass or rollback): what verification reads once needs no copy. It is ``launch(tokens)`` then
  ``span_rows()``: on a GPU llama.cpp returns from the launch at once and the rows wait for the pass (H200: 0.14 ms,
  then 1.93 ms), so a caller that ``launches_ahead`` does its bookkeeping in between.
- ``rollback(n)`` forgets every position from ``n`` on, so that the context holds exactly ``tokens[:n]``.
  After a rollback, evaluating the same tokens again gives the logits a fresh evaluation gives.
- Models whose memory cannot drop a tail (recurrent and hybrid architectures) keep snapshots of the
  sequence state instead: ``checkpoint()`` before a speculative span, and ``rollback`` restores the last
  checkpoint at or before ``n`` and replays the tokens between it and ``n``.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ds4spec.backend.abortable import ABORTED, AbortablePasses
from ds4spec.backend.runtime import default_threads, gpu_offload_supported, init_llama, interruptible_load, llama_cpp
from ds4spec.backend.target_options import TargetOptions
from ds4spec.backend.tokenizer import LlamaTokenizer
from ds4spec.backend.weights_memory import reads_model_weights
from ds4spec.core.contracts import LaunchAhead
from ds4spec.errors import InputError, ModelError

log = logging.getLogger(__name__)


class _Aborted(Exception):
    """A pass stopped by ``AbortablePasses``."""


def _never() -> bool:
    return False


@dataclass(frozen=True, slots=True)
class _Checkpoint:
    n_tokens: int
    state: bytes


class ContextFullError(InputError):
    """More tokens than the context window holds."""


class LlamaTarget:
    def __init__(self, path: Path | str, options: TargetOptions | None = None) -> None:
        init_llama()
        self.path = Path(path)
        self.options = opts = options or TargetOptions()
        if opts.n_ctx < 16:
            raise ValueError(f"context size must be at least 16 tokens, got {opts.n_ctx}")
        mparams = llama_cpp.llama_model_default_params()
        n_gpu = opts.n_gpu_layers
        mparams.n_gpu_layers = (-1 if gpu_offload_supported() else 0) if n_gpu is None else n_gpu
        self.n_gpu_layers = int(mparams.n_gpu_layers)
        self.weights_read = reads_model_weights(opts.mmap, self.n_gpu_layers, self.path)
        if self.weights_read:
            mparams.load_mode = llama_cpp.LLAMA_LOAD_MODE_NONE
        model = None
        try:
            with interruptible_load(mparams):
                model = llama_cpp.llama_model_load_from_file(str(self.path).encode("utf-8"), mparams)
        except KeyboardInterrupt:
            if model:  # the load ended before it saw the interrupt
                llama_cpp.llama_model_free(model)
            raise
        if not model:
            raise ModelError(
                f"llama.cpp could not load {self.path} (not a valid GGUF file, or an unsupported architecture)"
            )
        self._model = model
        self.n_threads = opts.n_threads or default_threads()
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = opts.n_ctx
        cparams.n_batch = opts.n_batch
        cparams.n_ubatch = opts.n_batch
        cparams.n_seq_max = 1
        cparams.n_threads = self.n_threads
        cparams.n_threads_batch = self.n_threads
        cparams.no_perf = True
        ctx = None
        try:
            with interruptible_load(None):
                ctx = llama_cpp.llama_init_from_model(model, cparams)
        except KeyboardInterrupt:
            if ctx:
                llama_cpp.llama_free(ctx)
            self._model = None
            llama_cpp.llama_model_free(model)
            raise
        if not ctx:
            self._model = None  # else ``__del__`` frees it a second time: a segfault after the error (--ctx 1000000)
            llama_cpp.llama_model_free(model)
            raise ModelError(f"llama.cpp could not create a context of {opts.n_ctx} tokens for {self.path}")
        self._ctx = ctx
        self._memory = llama_cpp.llama_get_memory(ctx)
        self.n_ctx = int(llama_cpp.llama_n_ctx(ctx))
        self.n_batch = opts.n_batch
        self.tokenizer = LlamaTokenizer(llama_cpp.llama_model_get_vocab(model))
        self.n_vocab = self.tokenizer.n_vocab
        self.n_ctx_train = int(llama_cpp.llama_model_n_ctx_train(model))
        self.metadata = model_metadata(self._model)
        self.uses_snapshots = opts.force_snapshots or bool(
            llama_cpp.llama_model_is_recurrent(model) or llama_cpp.llama_model_is_hybrid(model)
        )
        self._batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)
        self._tokens: list[int] = []
        self._checkpoints: list[_Checkpoint] = []
        self._launched: tuple[int, float] | None = None  # the pass whose rows are not read yet: its tokens, launch s
        self.pass_timing = PassTiming()

    # -- identity ---------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.metadata.get("general.name") or self.path.stem

    @property
    def architecture(self) -> str:
        return self.metadata.get("general.architecture", "unknown")

    @property
    def chat_template(self) -> str | None:
        return self.metadata.get("tokenizer.chat_template")

    # -- the sequence -----------------------------------------------------------------------------------

    @property
    def tokens(self) -> list[int]:
        """The tokens the context holds now (a copy)."""
        return list(self._tokens)

    def recent_tokens(self, n: int) -> list[int]:
        """The last ``n`` tokens of the context (cheaper than ``tokens`` on a long context)."""
        return self._tokens[-n:] if n > 0 else []

    @property
    def n_past(self) -> int:
        return len(self._tokens)

    def resync(self) -> None:
        """Drops positions llama.cpp holds beyond our record (an interrupt between decode and bookkeeping)."""
        held = int(llama_cpp.llama_memory_seq_pos_max(self._memory, 0)) + 1
        if held > self.n_past and not llama_cpp.llama_memory_seq_rm(self._memory, 0, self.n_past, -1):
            self._restore_and_replay(self.n_past)

    def reset(self) -> None:
        if self._launched is not None:
            self.span_rows()
        llama_cpp.llama_memory_clear(self._memory, True)
        self._tokens.clear()
        self._checkpoints.clear()

    def eval_prompt(self, tokens: Sequence[int]) -> np.ndarray:
        """Feeds ``tokens`` in chunks of ``n_batch`` and returns the logits after the last one (1-D)."""
        logits = self.read_prompt(tokens, _never)
        assert logits is not None
        return logits

    def read_prompt(self, tokens: Sequence[int], cancelled: Callable[[], bool]) -> np.ndarray | None:
        """``eval_prompt`` that asks ``cancelled`` before each chunk and, inside one, before each node of llama.cpp's
        graph (``AbortablePasses``): the answer is then None, and the chunks read whole so far stay in the context."""
        rows = self._read(tokens, 1, cancelled)
        return None if rows is None else rows[-1]

    def eval_tail(self, tokens: Sequence[int], rows: int) -> np.ndarray:
        """``eval_prompt`` that returns the logits after each of the last ``rows`` tokens (fewer where the last
        chunk of ``n_batch`` holds fewer): a model drafter reads the row before the last token for free."""
        out = self._read(tokens, rows, _never)
        assert out is not None
        return out

    def _read(self, tokens: Sequence[int], rows: int, cancelled: Callable[[], bool]) -> np.ndarray | None:
        if not tokens:
            raise ValueError("eval_prompt needs at least one token")
        out = np.empty(0, dtype=np.float32)
        with contextlib.ExitStack() as stack:
            passes = None if cancelled is _never else stack.enter_context(AbortablePasses(self._ctx, cancelled))
            for start in range(0, len(tokens), self.n_batch):
                if cancelled():
                    return None
                chunk = tokens[start : start + self.n_batch]
                last = start + self.n_batch >= len(tokens)
                try:
                    out = self._decode(chunk, rows=min(rows, len(chunk)) if last else 1)
                except _Aborted:
                    assert passes is not None
                    passes.raise_kept()
                    return None
        return out

    def eval_span(self, tokens: Sequence[int]) -> np.ndarray:
        """One forward pass over ``tokens`` (at most ``n_batch``); returns a (len(tokens), n_vocab) array."""
        self._check_span(tokens)
        return self._decode(tokens, rows=len(tokens))

    def eval_span_view(self, tokens: Sequence[int]) -> np.ndarray:
        """``eval_span``'s pass, its rows a view of llama.cpp's output buffer, not to be written: valid until the next
        pass or rollback. Copying them cost more than reading them: a 16-token pass's 16 rows of 151,936 floats took
        1.8 ms to copy out (Qwen2.5, AVX2 CPU), and verification reads only the rows up to its first rejection."""
        self.launch(tokens)
        return self.span_rows()

    def launch(self, tokens: Sequence[int]) -> None:
        """Starts ``eval_span_view``'s pass; ``span_rows`` gives its rows. The context holds ``tokens`` from here on."""
        self._check_span(tokens)
        start = time.perf_counter()
        self._run(tokens, rows=len(tokens))
        self._launched = (len(tokens), time.perf_counter() - start)

    def span_rows(self) -> np.ndarray:
        """The rows of the pass ``launch`` started, once it is done (not to be written, valid until the next pass or
        rollback). Left writeable: numpy's argmax copies an array flagged read-only first, and a plain step's row took
        150 us to judge instead of 85 (Qwen2.5's 151,936 logits, 2-core AVX-512 CPU; a 16-token pass's rows 81 us
        each instead of 67)."""
        if self._launched is None:
            raise RuntimeError("span_rows needs a pass launched and not read yet")
        (n, launch_seconds), self._launched = self._launched, None
        start = time.perf_counter()
        logits = llama_cpp.llama_get_logits(self._ctx)  # waits for the pass
        if n == 1:
            self.pass_timing.observe(launch_seconds, time.perf_counter() - start)
        return np.ctypeslib.as_array(logits, shape=(n, self.n_vocab))

    @property
    def launches_ahead(self) -> LaunchAhead:
        """Whether a caller may start a plain step before its bookkeeping: where a pass runs beside the caller
        (measured), or as ``TargetOptions.launch_ahead`` says. On a CPU the pass runs inside the launch: a step
        started early would hide nothing."""
        forced = self.options.launch_ahead
        if forced is None:
            return "where_it_pays" if self.pass_timing.runs_beside() else "never"
        return "always" if forced else "never"

    def _check_span(self, tokens: Sequence[int]) -> None:
        if not tokens:
            raise ValueError("eval_span needs at least one token")
        if len(tokens) > self.n_batch:
            raise ValueError(f"a span holds at most {self.n_batch} tokens, got {len(tokens)}")

    def checkpoint(self) -> None:
        """Marks the current position as one ``rollback`` can return to on snapshot-only models."""
        if not self.uses_snapshots:
            return
        n = llama_cpp.llama_state_seq_get_size(self._ctx, 0)
        buf = (ctypes.c_uint8 * n)()
        written = llama_cpp.llama_state_seq_get_data(self._ctx, buf, n, 0)
        self._checkpoints = [c for c in self._checkpoints if c.n_tokens < self.n_past]
        self._checkpoints.append(_Checkpoint(self.n_past, bytes(buf[:written])))

    def rollback(self, n: int) -> None:
        """Forgets every position from ``n`` on."""
        if self._launched is not None and n < self.n_past:
            self.span_rows()  # the pass must be done before its positions go
        if not 0 <= n <= self.n_past:
            raise ValueError(f"cannot roll back to {n}: the context holds {self.n_past} tokens")
        if n == self.n_past:
            return
        if not self.uses_snapshots and llama_cpp.llama_memory_seq_rm(self._memory, 0, n, -1):
            del self._tokens[n:]
            return
        self._restore_and_replay(n)

    def _restore_and_replay(self, n: int) -> None:
        usable = [c for c in self._checkpoints if c.n_tokens <= n]
        replay_from = 0
        keep = self._tokens[:n]
        if usable:
            cp = usable[-1]
            src = (ctypes.c_uint8 * len(cp.state)).from_buffer_copy(cp.state)
            if not llama_cpp.llama_state_seq_set_data(self._ctx, src, len(cp.state), 0):
                raise RuntimeError("llama.cpp could not restore a sequence snapshot")
            replay_from = cp.n_tokens
        else:
            llama_cpp.llama_memory_clear(self._memory, True)
        self._checkpoints = usable
        self._tokens = keep[:replay_from]
        if replay_from < n:
            self.eval_prompt(keep[replay_from:])

    # -- decoding ---------------------------------------------------------------------------------------

    def _decode(self, tokens: Sequence[int], *, rows: int) -> np.ndarray:
        """One pass; the logits after each of the last ``rows`` tokens, copied out."""
        self._run(tokens, rows=rows)
        out = np.empty((rows, self.n_vocab), dtype=np.float32)
        for r, i in enumerate(range(len(tokens) - rows, len(tokens))):
            ptr = llama_cpp.llama_get_logits_ith(self._ctx, i)
            out[r] = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))
        return out

    def _run(self, tokens: Sequence[int], *, rows: int) -> None:
        if self.n_past + len(tokens) > self.n_ctx:
            raise ContextFullError(
                f"{self.n_past + len(tokens)} tokens do not fit in the context of {self.n_ctx} tokens"
            )
        self._launched = None  # a pass launched before and never read: its rows are not wanted
        batch = self._batch
        start = self.n_past
        for i, tok in enumerate(tokens):
            batch.token[i] = tok
            batch.pos[i] = start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = i >= len(tokens) - rows
        batch.n_tokens = len(tokens)
        rc = llama_cpp.llama_decode(self._ctx, batch)
        if rc != 0:
            # Keep our record consistent with whatever llama.cpp kept before failing.
            pos_max = int(llama_cpp.llama_memory_seq_pos_max(self._memory, 0))
            self._tokens = (self._tokens + list(tokens))[: pos_max + 1]
            if rc == ABORTED:
                raise _Aborted
            raise RuntimeError(f"llama_decode failed with code {rc}")
        self._tokens.extend(tokens)

    # -- lifetime ---------------------------------------------------------------------------------------

    def close(self) -> None:
        # Clear each handle before freeing it: a Ctrl-C between the two steps must leak, not free twice
        # (``__del__`` calls close again).
        ctx, self._ctx = getattr(self, "_ctx", None), None
        if ctx:
            llama_cpp.llama_batch_free(self._batch)
            llama_cpp.llama_free(ctx)
        model, self._model = getattr(self, "_model", None), None
        if model:
            llama_cpp.llama_model_free(model)

    def __enter__(self) -> LlamaTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown: the library may already be gone
            self.close()


class PassTiming:
    """How long a one-token pass's launch takes, and the wait for its rows after it (moving averages): where the
    wait is the longer, the pass runs beside the caller (a GPU; a CPU computes it inside the launch)."""

    WEIGHT = 0.1
    SAMPLES = 4  # one-token passes timed before the answer counts

    def __init__(self) -> None:
        self.launch = 0.0
        self.wait = 0.0
        self.samples = 0

    def observe(self, launch: float, wait: float) -> None:
        w = 1.0 if self.samples == 0 else self.WEIGHT
        self.launch += w * (launch - self.launch)
        self.wait += w * (wait - self.wait)
        self.samples += 1

    def runs_beside(self) -> bool:
        return self.samples >= self.SAMPLES and self.wait > self.launch


def model_metadata(model: object) -> dict[str, str]:
    """Every GGUF metadata value of a loaded llama.cpp model (weights or vocabulary only), as text."""
    out: dict[str, str] = {}
    buf = ctypes.create_string_buffer(1 << 16)
    for i in range(llama_cpp.llama_model_meta_count(model)):
        key = _meta_string(model, llama_cpp.llama_model_meta_key_by_index, i, buf)
        out[key] = _meta_string(model, llama_cpp.llama_model_meta_val_str_by_index, i, buf)
    return out


def _meta_string(model: object, getter: object, index: int, buf: ctypes.Array[ctypes.c_char]) -> str:
    n = getter(model, index, buf, len(buf))  # type: ignore[operator]
    if n >= len(buf):  # a long chat template: ask again with room for it
        buf = ctypes.create_string_buffer(n + 1)
        n = getter(model, index, buf, len(buf))  # type: ignore[operator]
    return buf.raw[: max(n, 0)].decode("utf-8", errors="replace")
