"""What a drafted token costs each model source of a drafter, measured when the drafter is loaded, and which
sources could pay on this target at all.

Why: a policy learns a source's cost by drafting with it, and that first draft is not free. On the project's
2-core CPU a SmolLM2-135M draft costs about 12 ms a token against a 31 ms step of the 1.5B target, and a
verify pass over 2 tokens already costs 1.8 steps: that drafter cannot beat plain decoding even at 90%
acceptance. Learning so online cost 15% of HumanEval's 26-token answers (the one exploratory draft read the prompt).
Measured here instead, on a short text while the target is idle, a source that could not beat a plain step
by a tenth even at 90% acceptance and with nothing but its forward passes charged (a lower bound) is never asked.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ds4spec.core.contracts import Proposer
from ds4spec.core.drafting import DraftContext, Drafter
from ds4spec.paths import data_dir
from ds4spec.policy.cycle_costs import could_pay_on
from ds4spec.policy.profile import CHECK_EVERY_S, VerifyProfile, read_json, write_json

log = logging.getLogger(__name__)

SAMPLE = (b"def total_price(items):\n    \"\"\"The sum of price times count over items.\"\"\"\n"
          b"    result = 0\n    for item in items:\n        result += item.price * item.count\n")
# Text committed between the timed drafts: one or two tokens each, as a cycle commits.
COMMITS = (b"    return", b" result", b"\n\n\n", b"def", b" mean", b"(values", b"):\n")
# How much faster than plain decoding a source's best case (``could_pay_on``) must be for it to be asked. That bound
# leaves out what drafting costs beyond the verify pass and the drafted tokens: the model's read of each prompt (3 to 8
# plain steps an answer), the loop's work for a model source (the triggers' cycle 0.36 to 0.48 ms against 0.22 with
# lookup alone, 0.8% of a 26 ms step), and acceptance below 90%. On the Zen 5 AMD EPYC guest the default pair's SmolLM2
# (5.6 to 6.4 ms a token, 0.23 to 0.26 plain steps) passed the bare bound by 0.5 to 3%, and by 2 to 6% with AVX2-only
# kernels: asked, it drafted nothing on code in 15 answers, and the loop's cost moved with a verdict that flipped from
# load to load (run 77). Memory-bound storage passes by far more: the F16 pair's drafter on the same guest by 60%, the
# default pair's on the Intel AVX-512 FP16 machine by 35 to 44%.
PAY_MARGIN = 0.10
KEPT_FASTEST_S = 86400.0  # how long a faster timing of a source outlasts slower ones (``_faster``)
# Another text, read after the drafts: the first read also paid for the model's first page faults, and a model
# drafter keeps a common prefix from its last text, which would leave nothing to read.
READ_SAMPLE = (b"class Inventory:\n    \"\"\"Items by name, with the count of each in stock.\"\"\"\n\n"
               b"    def __init__(self) -> None:\n        self.items: dict[str, int] = {}\n\n"
               b"    def add(self, name: str, count: int = 1) -> None:\n"
               b"        self.items[name] = self.items.get(name, 0) + count\n")


@dataclass(frozen=True, slots=True)
class SourceCost:
    """A drafter source and its measured seconds per drafted token (None: not measured, or nothing to measure),
    and the seconds it took to read ``read_bytes`` of text it had not seen (None: not measured)."""

    source: str
    seconds_per_token: float | None
    affordable: bool
    read_seconds: float | None = None
    read_bytes: int = 0


def measure_source(drafter: Drafter, source: str) -> tuple[float | None, float | None]:
    """Seconds per drafted token: the fastest of several drafts of one token from ``source``, each after a commit
    of a token or two (a model's forward pass over the committed text: what every drafted token costs at least),
    None when the source offered nothing to time. And seconds to read ``READ_SAMPLE`` (what a model that waited
    its turn pays before it drafts: a policy that charges reads needs it before its first one)."""
    drafter.begin(DraftContext(text=SAMPLE))
    drafter.prepare(source)
    best: float | None = None
    for piece in COMMITS:
        start = time.perf_counter()
        drafter.extend(piece)
        draft = drafter.propose_from(source, 1)
        elapsed = time.perf_counter() - start
        if draft.text:
            best = elapsed if best is None else min(best, elapsed)
    drafter.begin(DraftContext(text=READ_SAMPLE))
    start = time.perf_counter()
    drafter.prepare(source)
    return best, time.perf_counter() - start


def source_costs(drafter: Proposer, profile: VerifyProfile, draft_max: int) -> list[SourceCost]:
    """Each of ``drafter``'s sources, its cost and whether it could pay. Lookup needs no model and costs
    nothing; without a measured profile there is no plain step to compare with, and every source may try."""
    costs: list[SourceCost] = []
    for source in drafter.sources:
        if source == "lookup" or not profile.measured:
            costs.append(_untimed(source))
            continue
        measured = drafter.call_alone(lambda inner, s=source: measure_source(inner, s))
        seconds, read = measured if isinstance(measured, tuple) else (None, None)
        if not isinstance(seconds, float):  # it failed, hung or had nothing: the policy learns online
            costs.append(_untimed(source))
            continue
        costs.append(_judged(drafter.name, source, seconds, read, len(READ_SAMPLE), profile, draft_max))
    return costs


def _untimed(source: str) -> SourceCost:
    """A source asked without a figure from load: lookup (no model, nothing to time), or one that could not be timed
    or compared with a plain step (the policy learns its cost online)."""
    return SourceCost(source, None, True)


def _judged(drafter_name: str, source: str, seconds: float, read: float | None, read_bytes: int,
            profile: VerifyProfile, draft_max: int) -> SourceCost:
    """A source timed at ``seconds`` a drafted token: whether it could pay on ``profile``."""
    affordable = could_pay_on(profile, seconds / profile.spans[1], draft_max, margin=PAY_MARGIN)
    if not affordable:
        log.info("%s: %s drafts cost %.1f ms a token against a %.1f ms target step; not asked",
                 drafter_name, source, seconds * 1000, profile.spans[1] * 1000)
    return SourceCost(source, seconds, affordable, read, read_bytes)


def costs_file() -> Path:
    return data_dir() / "draft-costs.json"


def cached_source_costs(drafter: Proposer, profile: VerifyProfile, draft_max: int, key: str,
                        *, now: float | None = None) -> list[SourceCost]:
    """``source_costs``, measured at most once every ``CHECK_EVERY_S`` for ``key`` (what the times depend on: the
    drafter's model file, threads and backend, the target, the machine) and kept on disk between processes, as the
    verify profile is: a one-shot ``ds4spec complete`` spent 0.4 s of its 3.5 s timing SmolLM2 (default pair,
    2-core AVX-512). Whether a source could pay is judged again from the times and this profile."""
    if not profile.measured:  # nothing to judge against, and nothing is timed
        return source_costs(drafter, profile, draft_max)
    now = time.time() if now is None else now
    cache = read_json(costs_file())
    entry = cache.get(key)
    if isinstance(entry, dict) and isinstance(entry.get("at"), (int, float)) and 0 <= now - entry["at"] < CHECK_EVERY_S:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            return [_cached(drafter.name, source, entry["sources"], profile, draft_max) for source in drafter.sources]
    costs = source_costs(drafter, profile, draft_max)
    timed = {c.source: [c.seconds_per_token, c.read_seconds, c.read_bytes, now] for c in costs
             if c.seconds_per_token is not None}
    if timed and all(c.seconds_per_token is not None for c in costs if c.source != "lookup"):
        earlier = entry.get("sources") if isinstance(entry, dict) else None
        kept = earlier if isinstance(earlier, dict) else {}
        faster = {source: _faster(times, kept.get(source), now) for source, times in timed.items()}
        write_json(costs_file(), {**cache, key: {"at": now, "sources": faster}})
        if faster != timed:  # a kept timing stands: the verdict is its
            with contextlib.suppress(KeyError, TypeError, ValueError):
                return [_cached(drafter.name, source, faster, profile, draft_max) for source in drafter.sources]
    return costs


def _faster(new: list[Any], kept: object, now: float) -> list[Any]:
    """Of a source's new times and those kept for it, the faster, unless the kept ones are older than
    ``KEPT_FASTEST_S``. Measured while another process loaded its models, SmolLM2 took 16.7 ms a token and 0.95 s
    for a read it does in 0.16 to 0.28 (5.7 to 7.3 ms a token that day): kept for the hour, that rules the model out
    of every command started in it, and a source never asked is never measured again, whereas a figure too fast is
    corrected by the policies' own measurements at the first draft."""
    if not (isinstance(kept, list) and len(kept) == 4 and all(isinstance(x, (int, float)) for x in (kept[0], kept[3]))
            and 0 <= now - kept[3] < KEPT_FASTEST_S and kept[0] < new[0]):
        return new
    return kept


def _cached(drafter_name: str, source: str, times: dict[str, list[float | int | None]], profile: VerifyProfile,
            draft_max: int) -> SourceCost:
    if source == "lookup":
        return _untimed(source)
    seconds, read, read_bytes = times[source][:3]
    if not isinstance(seconds, float):
        raise ValueError(f"no time kept for {source}")
    return _judged(drafter_name, source, seconds, read if isinstance(read, float) else None, int(read_bytes or 0),
                   profile, draft_max)


def unasked_note(drafter_name: str, costs: Sequence[SourceCost], profile: VerifyProfile) -> str | None:
    """One line telling the user that their drafter's model is measured too slow to be asked, or None."""
    slow = [c for c in costs if not c.affordable and c.seconds_per_token is not None]
    if not slow or not profile.measured:
        return None
    left = "text lookup only" if any(c.affordable and c.source == "lookup" for c in costs) else "no drafts"
    names = ", ".join(f"{c.source} at {c.seconds_per_token * 1000:.1f} ms a token" for c in slow
                      if c.seconds_per_token is not None)
    return (f"{drafter_name} drafts too slowly to pay here ({names}, against a {profile.spans[1] * 1000:.1f} ms "
            f"target step): speculating with {left}; --no-cost-check asks it anyway")

