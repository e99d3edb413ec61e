"""Runs the peer systems of ``ds4spec bench --peers`` over the bench's own prompts, never letting one crash it.

Every failure of a peer becomes part of its record: a missing package or model (``available`` says why),
an exception while loading, warming up or generating. The bench goes on with the other peers and reports
the failed one as a row with its reason. Peers loaded together run interleaved, prompt by prompt: by default
``ds4spec bench`` loads every peer beside its own target and runs them between its own runs of each prompt
(:class:`PeerSitting`); ``run_peer_groups`` runs groups one after another, so that at most one group's models
are in memory at a time.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ds4spec.bench.peers import BenchTask, Peer, PeerResult

WARMUP_TOKENS = 8  # one short untimed generation per peer, so the first measured run pays no page faults


@dataclass(slots=True)
class SystemRuns:
    """Every run of one system, by (workload, task id), and whether it could run at all."""

    name: str
    family: str  # ds4spec, llama.cpp or transformers
    baseline: str  # the plain system of its family: what "speedup over its own plain run" divides by
    status: str = "ok"  # ok, unavailable (never ran) or failed (some or all runs raised)
    reason: str = ""
    results: dict[tuple[str, str], PeerResult] = field(default_factory=dict)
    failures: int = 0

    def fail(self, what: str, exc: BaseException) -> None:
        self.failures += 1
        self.status = "failed"
        if not self.reason:  # the first failure says most; later ones usually repeat it
            self.reason = f"{what}: {describe(exc)}"


def describe(exc: BaseException) -> str:
    """An exception as one short line for a table cell."""
    text = str(exc).strip().splitlines()
    line = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return line if len(line) <= 200 else line[:197] + "..."


def stderr_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class PeerSitting:
    """Peers loaded, run task by task, and closed: what lets ``ds4spec bench`` run them beside its own modes.

    Every live peer runs each task in turn, so a peer and its plain baseline (and, run between ds4spec's own
    runs of that prompt, ds4spec) see the same machine. ``start`` loads a set of peers, ``close`` frees them."""

    def __init__(self, max_tokens: int, log: Callable[[str], None] = stderr_line) -> None:
        self.max_tokens = max_tokens
        self.records: list[SystemRuns] = []
        self._log = log
        self._live: list[tuple[Peer, SystemRuns]] = []
        self._tasks = 0

    def start(self, peers: Sequence[Peer], warm_up: BenchTask | None) -> None:
        for peer in peers:
            record = SystemRuns(peer.name, peer.family, peer.baseline)
            self.records.append(record)
            if _start(peer, record, warm_up, self._log):
                self._live.append((peer, record))

    def run(self, task: BenchTask, reverse: bool = False) -> None:
        """Every live peer runs ``task``, in the order they started or, ``reverse``, the other way round."""
        self._tasks += 1
        for peer, record in reversed(self._live) if reverse else self._live:
            try:
                record.results[(task.workload, task.task_id)] = peer.run(task, self.max_tokens)
            except Exception as exc:  # one bad run is a row's note, not the end of the bench
                record.fail(f"{task.task_id}", exc)
        if self._live:
            self._log(f"ds4spec: bench peers {task.workload} {task.task_id} done")

    def close(self) -> None:
        live, self._live = self._live, []
        for peer, _ in live:
            _close(peer)
        for record in self.records:
            if record.failures and record.results:
                record.reason = f"{record.failures} of {self._tasks} runs failed; first: {record.reason}"


def run_peer_groups(groups: Sequence[Sequence[Peer]], tasks: Sequence[BenchTask], max_tokens: int,
                    log: Callable[[str], None] = stderr_line) -> list[SystemRuns]:
    """Each group loaded, run over every task and closed before the next group loads."""
    records: list[SystemRuns] = []
    for group in groups:
        sitting = PeerSitting(max_tokens, log)
        try:
            sitting.start(group, tasks[0] if tasks else None)
            for task in tasks:
                sitting.run(task)
        finally:
            sitting.close()
        records += sitting.records
    return records


def _start(peer: Peer, record: SystemRuns, warm_up: BenchTask | None, log: Callable[[str], None]) -> bool:
    """Checks, loads and warms up one peer; False (with the reason recorded) when it cannot run."""
    try:
        reason = peer.available()
    except Exception as exc:
        reason = describe(exc)
    if reason:
        record.status, record.reason = "unavailable", reason
        log(f"ds4spec: peer {peer.name} unavailable: {reason}")
        return False
    log(f"ds4spec: loading peer {peer.name}")
    try:
        peer.load()
        if warm_up is not None:
            peer.run(replace(warm_up, stop=()), WARMUP_TOKENS)
    except Exception as exc:
        record.fail("load", exc)
        log(f"ds4spec: peer {peer.name} failed: {record.reason}")
        _close(peer)
        return False
    return True


def _close(peer: Peer) -> None:
    try:
        peer.close()
    except Exception as exc:  # freeing is best effort; the results are already recorded
        stderr_line(f"ds4spec: closing peer {peer.name}: {describe(exc)}")
