"""The cross-system table of ``ds4spec bench --peers``: one row per system and workload.

Each row: tokens/s, speedup over the system's own plain run, over llama.cpp plain (with its 95% range over the
prompts both ran: ``ds4spec.bench.spread``) and over ds4spec plain, drafted and accepted tokens and the acceptance
where the system counts them, and on how many prompts its greedy tokens equal llama.cpp plain's, ds4spec plain's and
its own plain run's. A system that could not run still has its rows, with the status and the reason.
"""

from __future__ import annotations

from collections.abc import Sequence

from ds4spec.bench.peer_runs import SystemRuns
from ds4spec.bench.peers import LLAMA_PLAIN, PeerResult
from ds4spec.bench.spread import Answer, format_interval, speedup_interval
from ds4spec.core.events import Finished

DS4SPEC_PLAIN = "ds4spec plain"

Row = dict[str, object]


def result_of(finished: Finished, speculative: bool) -> PeerResult:
    """A ds4spec generation in the shape every system's run has."""
    s = finished.stats
    drafts = (s.drafted_tokens, s.accepted_tokens, s.verify_passes_with_draft) if speculative else (None,) * 3
    return PeerResult(finished.tokens, s.generation_seconds, s.committed_tokens, finished.reason.value, *drafts)


def _rate(results: Sequence[PeerResult]) -> float | None:
    seconds = sum(r.seconds for r in results)
    return sum(r.timed_tokens for r in results) / seconds if seconds > 0 else None


def _matches(mine: dict[tuple[str, str], PeerResult], theirs: SystemRuns | None) -> tuple[int, int] | None:
    if theirs is None:
        return None
    common = [k for k in mine if k in theirs.results]
    return sum(mine[k].tokens == theirs.results[k].tokens for k in common), len(common)


def speedup_range(mine: dict[tuple[str, str], PeerResult], theirs: SystemRuns | None) -> list[float] | None:
    """The 95% range of ``mine``'s speedup over ``theirs`` on the prompts both ran (``speedup_interval``)."""
    if theirs is None:
        return None
    answers = [Answer(base.timed_tokens, base.seconds, r.timed_tokens, r.seconds)
               for k, r in mine.items() if (base := theirs.results.get(k)) is not None]
    interval = speedup_interval(answers)
    return [round(x, 3) for x in interval] if interval else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def system_rows(systems: Sequence[SystemRuns], workloads: Sequence[str]) -> list[Row]:
    by_name = {s.name: s for s in systems}
    rows: list[Row] = []
    for workload in workloads:
        rates = {s.name: _rate([r for k, r in s.results.items() if k[0] == workload]) for s in systems}
        for s in systems:
            mine = {k: r for k, r in s.results.items() if k[0] == workload}
            rate = rates[s.name]
            drafted = [r.drafted for r in mine.values() if r.drafted is not None]
            accepted = sum(r.accepted or 0 for r in mine.values())
            passes = sum(r.passes_with_draft or 0 for r in mine.values())
            vs_llama = _matches(mine, by_name.get(LLAMA_PLAIN)) if s.name != LLAMA_PLAIN else None
            vs_ds4 = _matches(mine, by_name.get(DS4SPEC_PLAIN)) if s.name != DS4SPEC_PLAIN else None
            vs_own = _matches(mine, by_name.get(s.baseline)) if s.name != s.baseline else None
            rows.append({
                "workload": workload, "system": s.name, "family": s.family, "baseline": s.baseline,
                "status": s.status, "reason": s.reason, "runs": len(mine),
                "tokens": sum(len(r.tokens) for r in mine.values()),
                "seconds": round(sum(r.seconds for r in mine.values()), 3),
                "tokens_per_second": round(rate, 2) if rate is not None else None,
                "speedup_own": _ratio(rate, rates.get(s.baseline)),
                "speedup_vs_llama_plain": _ratio(rate, rates.get(LLAMA_PLAIN)),
                "speedup_vs_llama_plain_interval": speedup_range(mine, by_name.get(LLAMA_PLAIN))
                if s.name != LLAMA_PLAIN else None,
                "speedup_vs_ds4spec_plain": _ratio(rate, rates.get(DS4SPEC_PLAIN)),
                "drafted": sum(drafted) if drafted else None,
                "accepted": accepted if drafted else None,
                "acceptance": round(accepted / sum(drafted), 3) if drafted and sum(drafted) else None,
                "mean_accepted_length": round(accepted / passes, 2) if drafted and passes else None,
                "matches_llama_plain": vs_llama[0] if vs_llama else None,
                "compared_llama_plain": vs_llama[1] if vs_llama else None,
                "matches_ds4spec_plain": vs_ds4[0] if vs_ds4 else None,
                "compared_ds4spec_plain": vs_ds4[1] if vs_ds4 else None,
                "matches_own_plain": vs_own[0] if vs_own else None,
                "compared_own_plain": vs_own[1] if vs_own else None,
            })
    return rows


def peer_records(systems: Sequence[SystemRuns]) -> list[Row]:
    """One record per run of each peer (ds4spec's own runs have theirs), so that a comparison can be worked out
    again from ``--out``: its prompt, seconds, timed tokens, finish and drafts."""
    return [{"system": s.name, "workload": workload, "task_id": task_id, "seconds": round(r.seconds, 4),
             "timed_tokens": r.timed_tokens, "tokens": len(r.tokens), "finish": r.finish, "drafted": r.drafted,
             "accepted": r.accepted}
            for s in systems for (workload, task_id), r in s.results.items()]


def _cell(value: object, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _fraction(row: Row, key: str) -> str:
    n = row[f"compared_{key}"]
    return "-" if n is None else f"{row[f'matches_{key}']}/{n}"


def print_systems(rows: Sequence[Row]) -> None:
    head = (f"{'workload':<10} {'system':<26} {'tok/s':>7} {'vs own':>7} {'vs llama':>8} {'95% range':>10} "
            f"{'vs ds4':>7} {'drafted':>8} {'accept':>6} {'=llama':>6} {'=ds4':>6} {'=own':>6}  status")
    print(head)
    print("-" * len(head))
    for r in rows:
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r['reason']}"
        print(f"{r['workload']:<10} {r['system']:<26} {_cell(r['tokens_per_second'], '.2f'):>7} "
              f"{_cell(r['speedup_own'], '.2f'):>7} {_cell(r['speedup_vs_llama_plain'], '.2f'):>8} "
              f"{format_interval(r.get('speedup_vs_llama_plain_interval'), '-'):>10} "
              f"{_cell(r['speedup_vs_ds4spec_plain'], '.2f'):>7} {_cell(r['drafted'], 'd'):>8} "
              f"{_cell(r['acceptance'], '.0%'):>6} {_fraction(r, 'llama_plain'):>6} {_fraction(r, 'ds4spec_plain'):>6} "
              f"{_fraction(r, 'own_plain'):>6}  {status}")
