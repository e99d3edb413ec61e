"""Measuring aid (not part of the product): the real time (no profiler) of the speculative loop's parts outside model
calls, per cycle, over a `ds4spec bench` run: the verdict (each row's argmax), alignment, the policies' decisions and
observations, committing tokens, following the text. Usage, from the repository root:
    python docs/bench/cpu/loop_parts.py bench --pair f16 --limit 5 --max-tokens 128 --workload edits --mode triggers
"Commit" counts plain decoding's commits too, so its figure a cycle is an upper bound.
"""

from __future__ import annotations

import atexit
import collections
import sys
import time
from collections.abc import Callable, Generator

import ds4spec.core.plain as plain
import ds4spec.core.speculative as speculative
from ds4spec.cli import main
from ds4spec.policy.copying import LookupGate
from ds4spec.policy.triggers import TriggerPolicy

SECONDS: dict[str, float] = collections.defaultdict(float)
CALLS: collections.Counter[str] = collections.Counter()
IN_LOOP = [False]


def _timed(owner: object, name: str, label: str) -> None:
    inner: Callable[..., object] = getattr(owner, name)

    def timed(*args: object, **kwargs: object) -> object:
        if not IN_LOOP[0]:
            return inner(*args, **kwargs)
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            SECONDS[label] += time.perf_counter() - start
            CALLS[label] += 1

    setattr(owner, name, timed)


_timed(speculative._Cycle, "_verify", "verdict (argmax)")
_timed(speculative, "align_draft", "align")
_timed(speculative._Cycle, "_follow", "follow (drafter, policy)")
_timed(speculative._Cycle, "_account", "account")
_timed(plain.OutputStream, "commit", "commit")
for policy, label in ((TriggerPolicy, "triggers"), (LookupGate, "lookup gate")):
    _timed(policy, "draft_length", f"{label}: draft_length")
    _timed(policy, "observe", f"{label}: observe")
_run = speculative._Cycle.run


def _run_timed(self: speculative._Cycle, *args: object, **kwargs: object) -> Generator[object, None, object]:
    IN_LOOP[0] = True
    try:
        return (yield from _run(self, *args, **kwargs))  # type: ignore[arg-type]
    finally:
        IN_LOOP[0] = False
        CALLS["cycles"] += len(self.loop_samples)
        SECONDS["loop (as the bench measures it)"] += sum(self.loop_samples)


speculative._Cycle.run = _run_timed  # type: ignore[method-assign]


def _report() -> None:
    cycles = CALLS["cycles"] or 1
    print(f"cycles {CALLS['cycles']}", file=sys.stderr)
    for label, seconds in sorted(SECONDS.items(), key=lambda item: -item[1]):
        print(f"{label:34s} {seconds * 1e3 / cycles:7.3f} ms a cycle ({CALLS[label]} calls)", file=sys.stderr)


atexit.register(_report)
sys.exit(main(sys.argv[1:]))
