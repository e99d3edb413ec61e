"""A prompt read stops inside its chunk when cancelled: at llama.cpp's next graph node, not after the chunk.

Before, a cancel was heard between chunks of ``n_batch`` tokens only: a Ctrl-C, an editor's cancel or an HTTP client
gone waited out a chunk that takes seconds to a minute on a CPU. A model big enough that one chunk takes a while
reads a prompt of two chunks, cancelled at a given question: before a chunk, or at one of its graph's nodes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from tinymodel import build_tiny_gguf

from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.target_options import TargetOptions

CHUNK = 1024


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaTarget]:
    path = build_tiny_gguf(tmp_path_factory.mktemp("slow") / "slow.gguf", n_embd=512, n_layer=8, n_head=8,
                           context_length=4096)
    with LlamaTarget(path, TargetOptions(n_ctx=4096, n_batch=CHUNK)) as t:
        yield t


def prompt(target: LlamaTarget) -> list[int]:
    return target.tokenizer.tokenize(b"def f(x):\n    return x * 2\n" * 200)[: 2 * CHUNK]


def whole_read(target: LlamaTarget) -> np.ndarray:
    target.reset()
    logits = target.read_prompt(prompt(target), lambda: False)
    assert logits is not None
    return logits.copy()


def asked_from(call: int) -> tuple[list[int], Callable[[], bool]]:
    """A ``cancelled`` that says yes from its ``call``-th question on: the read asks once before each chunk, and
    llama.cpp before each node of a chunk's graph."""
    calls = [0]

    def cancelled() -> bool:
        calls[0] += 1
        return calls[0] >= call

    return calls, cancelled


def test_a_cancel_inside_a_chunk_stops_it_there_and_keeps_nothing_of_it(target: LlamaTarget) -> None:
    expected = whole_read(target)
    target.reset()
    calls, cancelled = asked_from(3)  # before the first chunk, its first node, then yes at the second node
    start = time.perf_counter()
    assert target.read_prompt(prompt(target), cancelled) is None
    took = time.perf_counter() - start
    assert calls[0] == 3 and target.n_past == 0  # stopped in the first chunk: none of its tokens stay
    # Whatever was left behind, the next read is the read a fresh context gives, and takes longer than the stop.
    start = time.perf_counter()
    again = target.read_prompt(prompt(target), lambda: False)
    assert again is not None and np.array_equal(again, expected)
    assert took < time.perf_counter() - start


def test_a_cancel_in_the_second_chunk_keeps_the_first(target: LlamaTarget) -> None:
    target.reset()
    asked = [0]

    def cancelled() -> bool:  # yes at the second chunk's second node: its first question, before it, goes by
        if target.n_past < CHUNK:
            return False
        asked[0] += 1
        return asked[0] >= 3

    assert target.read_prompt(prompt(target), cancelled) is None
    assert target.tokens == prompt(target)[:CHUNK]


def test_ctrl_c_inside_a_chunk_is_raised_after_it_stopped(target: LlamaTarget) -> None:
    """Python's own SIGINT handler raises in whatever Python runs: now the abort callback, where a ctypes callback
    would print the exception and drop it. It is kept, the pass stopped, and raised once llama.cpp has returned."""
    expected = whole_read(target)
    target.reset()
    calls = [0]

    def interrupted() -> bool:
        calls[0] += 1
        if calls[0] == 3:
            raise KeyboardInterrupt
        return False

    with pytest.raises(KeyboardInterrupt):
        target.read_prompt(prompt(target), interrupted)
    assert target.n_past == 0
    again = target.read_prompt(prompt(target), lambda: False)
    assert again is not None and np.array_equal(again, expected)


def test_a_read_that_is_never_cancelled_leaves_no_callback_on_later_passes(target: LlamaTarget) -> None:
    """The callback is llama.cpp's only while a prompt is read: a one-token step never takes the interpreter's lock
    for each of its graph's nodes."""
    target.reset()
    calls = 0

    def counted() -> bool:
        nonlocal calls
        calls += 1
        return False

    assert target.read_prompt(prompt(target)[:16], counted) is not None
    during = calls
    target.eval_span([prompt(target)[16]])
    assert during > 16 and calls == during  # asked at every node of the read, never during the step
