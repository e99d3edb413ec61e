"""Runs the peer systems of ``ds4spec bench --peers`` over the bench's own prompts, never letting one crash it.

Every failure of a peer becomes part of its record: a missing package or model (``available`` says why),
an exception while loading, warming up or generating. The bench goes on with the other peers and reports
the failed one as a row with its reason. Peers of one group are loaded together and run interleaved,
prompt by prompt; groups run one after another, so at most one group's models are in memory at a time.
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


def run_peer_groups(groups: Sequence[Sequence[Peer]], tasks: Sequence[BenchTask], max_tokens: int,
                    log: Callable[[str], None] = stderr_line) -> list[SystemRuns]:
    records: list[SystemRuns] = []
    for group in groups:
        records += _run_group(group, tasks, max_tokens, log)
    return records


def _run_group(group: Sequence[Peer], tasks: Sequence[BenchTask], max_tokens: int,
               log: Callable[[str], None]) -> list[SystemRuns]:
    records = [SystemRuns(p.name, p.family, p.baseline) for p in group]
    live: list[tuple[Peer, SystemRuns]] = []
    try:
        for peer, record in zip(group, records, strict=True):
            if _start(peer, record, tasks, log):
                live.append((peer, record))
        for task in tasks:
            for peer, record in live:
                try:
                    record.results[(task.workload, task.task_id)] = peer.run(task, max_tokens)
                except Exception as exc:  # one bad run is a row's note, not the end of the bench
                    record.fail(f"{task.task_id}", exc)
            if live:
                log(f"ds4spec: bench peers {task.workload} {task.task_id} done")
    finally:
        for peer, _ in live:
            _close(peer)
    for record in records:
        if record.failures and record.results:
            record.reason = f"{record.failures} of {len(tasks)} runs failed; first: {record.reason}"
    return records


def _start(peer: Peer, record: SystemRuns, tasks: Sequence[BenchTask], log: Callable[[str], None]) -> bool:
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
        if tasks:
            peer.run(replace(tasks[0], stop=()), WARMUP_TOKENS)
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
