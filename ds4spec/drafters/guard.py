"""A drafter behind a deadline and an exception barrier: whatever it does, the output cannot change.

Calls run in order on one worker thread. ``propose`` waits with a deadline. A drafter that raises, hangs past
the deadline, or returns something that is not a ``Draft`` of bytes yields no draft for that cycle, and the
failure is counted. After a hang or a failed ``begin``/``extend`` its state is unknown, so it is benched until
the next generation (and until the hung call has returned). A drafter none of whose sources will be asked
(``follow_only``: the cost check ruled them all out) is left alone altogether: it follows no text.

When to follow the text: with ``background`` (cores to spare, or a GPU), ``begin`` and ``extend`` are queued
without waiting and ``prepare`` makes a model drafter read its prompt while the target reads its own. On a
CPU whose cores the target already uses, drafter work beside a target pass slows that pass down (measured
on 2 cores: a drafter reading its prompt made each plain step of the target 2.8x slower), so without
``background`` the text is only recorded, and the drafter catches up just before it is asked for a draft:
a drafter that the policy never asks costs nothing. Text lookup alone never takes a worker (``needs_a_worker``),
nor does a drafter whose model the cost check rules out (``follow_only``): it runs inline. The catch-up has its own,
longer deadline, since reading a long prompt is work, not a hang; the part that reads the prompt is reported as
``Draft.sync_seconds`` (a generation pays it once, whatever the draft lengths), while reading the text committed since
the last draft is part of every drafting cycle's cost. All that it read is reported as ``Draft.read_seconds``: a
policy that charges reading by the bytes read (``ds4spec.policy.reading``) needs it apart from the cycle.

Where to run it: with ``inline`` (no background), calls run on the caller's thread, the one that runs the target,
and a drafter whose turn it is may use all of the target's threads. llama.cpp's CPU backend computes with OpenMP,
and libgomp keeps one pool of threads per thread that starts a parallel region: a drafter computing with two
threads on a worker of its own adds a second pool, libgomp then counts more threads than cores and cuts the spin
of every barrier to a few iterations, and each of the target's later steps pays a sleep and a wake per graph node
(measured, F16 target on 2 cores: a plain step 56 ms before a 2-thread drafter read on a worker, 70 ms after it,
for good; the same read on the target's thread, 56 ms after). A call inline cannot be cut short: one that
overruns its deadline is counted and benches the drafter when it returns, and its draft is dropped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, replace
from typing import TypeVar

from ds4spec.core.drafting import NO_DRAFT, Draft, DraftContext, Drafter, Enough, Worth

log = logging.getLogger(__name__)
T = TypeVar("T")

CATCH_UP_DEADLINE_S = 60.0  # reading a long prompt on one CPU thread takes seconds; a hang takes forever
MODEL_FREE_SOURCES = frozenset({"lookup"})  # sources whose drafts are a search of the text, no model


def needs_a_worker(sources: tuple[str, ...]) -> bool:
    """Whether drafting from ``sources`` is work worth a thread of its own beside the target: a model's. Text lookup
    runs inline: each hop to a worker and back cost more than its search (on the AVX2 CPU, an extend queued 6 us
    against 0.4 us inline, a proposal 50 us more), and in Python it holds the interpreter's lock either way."""
    return any(source not in MODEL_FREE_SOURCES for source in sources)


@dataclass(slots=True)
class DrafterFailures:
    raised: int = 0
    timed_out: int = 0
    invalid: int = 0

    @property
    def total(self) -> int:
        return self.raised + self.timed_out + self.invalid


class GuardedDrafter:
    def __init__(self, drafter: Drafter, *, deadline_s: float = 2.0, background: bool = True,
                 inline: bool = False) -> None:
        if background and inline:
            raise ValueError("a drafter that follows the text in the background cannot also run inline")
        self.drafter = drafter
        self.name = drafter.name
        self.sources = drafter.sources
        self.deadline_s = deadline_s
        self.background = background
        self.inline = inline
        self._inline_seconds = 0.0  # how long the last inline call ran (its deadline is checked after it returns)
        self.failures = DrafterFailures()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"drafter-{drafter.name}")
        self._last: Future[object] | None = None
        self._benched = False
        self._context: DraftContext | None = None  # without background: a begin not yet passed on
        self._backlog = bytearray()  # without background: committed bytes not yet passed on
        self._lock = threading.Lock()  # guards the two flags below, between the worker and close()
        self._running = False
        self._closed = False
        self._asked = True  # False: no source of it will be asked, so it follows nothing (``follow_only``)
        self._model_asked = needs_a_worker(drafter.sources)  # a model among the sources that will be asked

    @property
    def available(self) -> bool:
        return not self._benched

    def follow_only(self, sources: tuple[str, ...]) -> None:
        """Only ``sources`` will be asked from now on (the cost check's verdict, between generations): with none,
        the drafter is left alone for good; else it may stop following the text for the others. On a GPU a drafter
        that follows the text reads it on the GPU beside the target's passes, asked or not."""
        self._asked = bool(sources)
        self._model_asked = needs_a_worker(sources)
        if self._asked:
            self.call_alone(lambda drafter: drafter.follow_only(sources))
        if self.background and self._asked and not self._model_asked:
            self.settle()  # between generations: nothing of this one is left to pass on
            self.background, self.inline = False, True

    def begin(self, context: DraftContext) -> None:
        if not self._asked:
            return
        if self._last is not None and not self._last.done():
            self._benched = True  # a call from an earlier generation is still hanging
            return
        self._benched = False
        if self.background:
            self._last = self._submit(self._quietly, self.drafter.begin, context)
        else:
            self._context, self._backlog = context, bytearray()

    def warm(self) -> None:
        """With ``background``: a model drafter reads its prompt now, while the target reads its own, rather
        than inside the first measured cycle. Without: nothing (it reads it when first asked for a draft)."""
        if self.background and self._asked and not self._benched:
            self._last = self._submit(self._quietly, self.drafter.prepare, "any")

    def extend(self, committed: bytes) -> None:
        if self._benched or not self._asked or not committed:
            return
        if self.background:
            self._last = self._submit(self._quietly, self.drafter.extend, committed)
        else:
            self._backlog += committed

    def may_propose(self) -> bool:
        """False when a proposal now would surely be empty: benched, never asked, or, running inline with text lookup
        alone, the text's end occurs nowhere earlier (lookup catches up to answer, as it would to propose). A model
        is never made to read the text for this, nor a worker called: they are taken to have something."""
        if self._benched or not self._asked:
            return False
        if not self.inline or self._model_asked:
            return True
        try:  # called directly, not through _submit: its futures cost 85 us a cycle, more than the search
            self._catch_up_text()
            return self.drafter.may_propose() is not False
        except Exception as exc:  # any failure of the drafter is its own, never the output's
            self._lost_track(exc)
            return False

    def propose(self, max_tokens: int, source: str = "any", enough: Enough | None = None,
                worth: Worth | None = None) -> Draft:
        """The drafter's proposal (from ``source`` only, unless ``any``; a model stopping once ``enough``, or where
        ``worth`` says, which is asked only along with ``enough``), or ``NO_DRAFT`` when it fails."""
        if self._benched or not self._asked or max_tokens <= 0:
            return NO_DRAFT
        sync_seconds = read_seconds = 0.0
        if not self.background:
            reads_prompt = self._context is not None
            start = time.perf_counter()
            self._last = self._submit(self._catch_up, source)
            if not self._wait(self._last, CATCH_UP_DEADLINE_S):
                return NO_DRAFT
            read_seconds = time.perf_counter() - start
            if reads_prompt:  # once per generation; reading what was committed since the last draft is every cycle's
                sync_seconds = read_seconds
        if enough is not None:
            future = self._submit(self.drafter.propose_until, max_tokens, enough, source, worth)
        elif source == "any":
            future = self._submit(self.drafter.propose, max_tokens)
        else:
            future = self._submit(self.drafter.propose_from, source, max_tokens)
        self._last = future
        if not self._wait(future, self.deadline_s):
            return NO_DRAFT
        draft = future.result()
        if not isinstance(draft, Draft) or not isinstance(draft.text, bytes):
            self.failures.invalid += 1
            log.warning("drafter %s returned %r instead of a Draft of bytes", self.name, type(draft))
            return NO_DRAFT
        if not (sync_seconds or read_seconds):
            return draft
        return replace(draft, sync_seconds=draft.sync_seconds + sync_seconds,
                       read_seconds=draft.read_seconds + read_seconds)

    def call_alone(self, call: Callable[[Drafter], T]) -> T | None:
        """``call(drafter)`` on the worker between generations (a measurement), under the catch-up deadline; None
        when it raises or hangs. The next generation's ``begin`` starts the drafter afresh."""
        future = self._submit(call, self.drafter)
        self._last = future
        return future.result() if self._wait(future, CATCH_UP_DEADLINE_S) else None

    def _catch_up(self, source: str) -> None:
        """Passes on the recorded begin and text, then lets the drafter read them (worker thread)."""
        self._catch_up_text()
        self.drafter.prepare(source)

    def _catch_up_text(self) -> None:
        """Passes on the recorded begin and text."""
        context, self._context = self._context, None
        backlog, self._backlog = bytes(self._backlog), bytearray()
        try:
            if context is not None:
                self.drafter.begin(context)
            if backlog:
                self.drafter.extend(backlog)
        except Exception:
            self._benched = True  # its view of the text is now unknown
            raise

    def _wait(self, future: Future[object], deadline_s: float) -> bool:
        """Whether ``future`` finished in time without raising; a failure is counted and logged."""
        try:
            future.result(timeout=deadline_s)
            if self.inline and self._inline_seconds > deadline_s:
                raise FutureTimeout
        except FutureTimeout:
            self.failures.timed_out += 1
            self._benched = True
            log.warning("drafter %s missed its %.1f s deadline; drafting paused", self.name, deadline_s)
            return False
        except Exception as exc:  # any failure of the drafter is its own, never the output's
            self.failures.raised += 1
            log.warning("drafter %s raised %r; no draft this cycle", self.name, exc)
            return False
        return True

    def _quietly(self, call: object, arg: object) -> None:
        try:
            call(arg)  # type: ignore[operator]
        except Exception as exc:
            self._lost_track(exc)

    def _lost_track(self, exc: Exception) -> None:
        """The drafter failed while following the text: counted, and benched, since its view of the text is unknown."""
        self.failures.raised += 1
        self._benched = True
        log.warning("drafter %s failed to follow the text (%r); drafting paused", self.name, exc)

    def settle(self, timeout_s: float = CATCH_UP_DEADLINE_S) -> bool:
        """Waits until every call queued so far has returned; False when one is still running at the deadline."""
        try:
            self._submit(lambda: None).result(timeout=timeout_s)
        except FutureTimeout:
            return False
        return True

    def close(self) -> None:
        """Drops the queued calls and closes the drafter: now, or when the call running on the worker returns
        (freeing a model under a running call would crash the process). A call hung forever keeps it open."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._running:
                return
        self.drafter.close()

    def _submit(self, call: Callable[..., T], *args: object) -> Future[T]:
        if not self.inline:
            return self._pool.submit(self._on_worker, call, *args)
        future: Future[T] = Future()
        start = time.perf_counter()
        try:
            future.set_result(self._on_worker(call, *args))
        except Exception as exc:
            future.set_exception(exc)
        except BaseException:  # an interrupt: the generation ends, and the drafter's state is unknown
            self._benched = True
            raise
        finally:
            self._inline_seconds = time.perf_counter() - start
        return future

    def _on_worker(self, call: Callable[..., T], *args: object) -> T:
        with self._lock:
            if self._closed:  # dequeued just before close() dropped the queue
                raise RuntimeError(f"drafter {self.name} is closed")
            self._running = True
        try:
            return call(*args)
        finally:
            with self._lock:
                self._running = False
                closed = self._closed
            if closed:
                self.drafter.close()
