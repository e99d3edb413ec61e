"""A drafter behind a deadline and an exception barrier: whatever it does, the output cannot change.

Calls run in order on one worker thread. ``begin`` and ``extend`` are queued without waiting (a model
drafter reads the prompt while the target does); ``propose`` waits for the queue with a deadline. A drafter
that raises, hangs past the deadline, or returns something that is not a ``Draft`` of bytes yields no draft
for that cycle, and the failure is counted. After a hang or a failed ``begin``/``extend`` its state is
unknown, so it is benched until the next generation (and until the hung call has returned).
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

from ds4spec.drafters.base import NO_DRAFT, Draft, DraftContext, Drafter

log = logging.getLogger(__name__)


@dataclass(slots=True)
class DrafterFailures:
    raised: int = 0
    timed_out: int = 0
    invalid: int = 0

    @property
    def total(self) -> int:
        return self.raised + self.timed_out + self.invalid


class GuardedDrafter:
    def __init__(self, drafter: Drafter, *, deadline_s: float = 2.0) -> None:
        self.drafter = drafter
        self.name = drafter.name
        self.sources = drafter.sources
        self.deadline_s = deadline_s
        self.failures = DrafterFailures()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"drafter-{drafter.name}")
        self._last: Future[object] | None = None
        self._benched = False

    @property
    def available(self) -> bool:
        return not self._benched

    def begin(self, context: DraftContext) -> None:
        if self._last is not None and not self._last.done():
            self._benched = True  # a call from an earlier generation is still hanging
            return
        self._benched = False
        self._last = self._pool.submit(self._quietly, self.drafter.begin, context)

    def warm(self) -> None:
        """Queues a throw-away one-token draft, so that a model drafter evaluates its prompt now, in the
        background, rather than inside the first measured cycle."""
        if not self._benched:
            self._last = self._pool.submit(self._quietly, self.drafter.propose, 1)

    def extend(self, committed: bytes) -> None:
        if not self._benched and committed:
            self._last = self._pool.submit(self._quietly, self.drafter.extend, committed)

    def propose(self, max_tokens: int, source: str = "any") -> Draft:
        """The drafter's proposal (from ``source`` only, unless ``any``), or ``NO_DRAFT`` when it fails."""
        if self._benched or max_tokens <= 0:
            return NO_DRAFT
        if source == "any":
            future = self._pool.submit(self.drafter.propose, max_tokens)
        else:
            future = self._pool.submit(self.drafter.propose_from, source, max_tokens)
        self._last = future
        try:
            draft = future.result(timeout=self.deadline_s)
        except FutureTimeout:
            self.failures.timed_out += 1
            self._benched = True
            log.warning("drafter %s missed its %.1f s deadline; drafting paused", self.name, self.deadline_s)
            return NO_DRAFT
        except Exception as exc:  # any failure of the drafter is its own, never the output's
            self.failures.raised += 1
            log.warning("drafter %s raised %r; no draft this cycle", self.name, exc)
            return NO_DRAFT
        if not isinstance(draft, Draft) or not isinstance(draft.text, bytes):
            self.failures.invalid += 1
            log.warning("drafter %s returned %r instead of a Draft of bytes", self.name, type(draft))
            return NO_DRAFT
        return draft

    def _quietly(self, call: object, arg: object) -> None:
        try:
            call(arg)  # type: ignore[operator]
        except Exception as exc:
            self.failures.raised += 1
            self._benched = True  # its view of the text is now unknown
            log.warning("drafter %s failed to follow the text (%r); drafting paused", self.name, exc)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._last is None or self._last.done():
            self.drafter.close()
