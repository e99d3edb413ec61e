"""Runs `ds4spec bench` with every cycle of lookup alone's and the triggers' policies recorded (not part of the
product; a measuring aid): what each decided, in which copy state, at what figure and plain step, and what the
cycle then gave and cost. Usage, from the repository root (the device's steps: `device-steps.sh py`):
    TRACE=/tmp/trace.json python docs/bench/gpu/policy_trace.py bench --pair f16 --workload edits --mode lookup ...
Each record: [policy, "begin", prompt text bytes], [policy, "decide", copy state, answer tail bytes, event, length,
lookup's figure there, plain step ms], [policy, "outcome", requested, drafted, accepted, cycle ms, source]; the
bench's first generation is its warm-up.
"""

from __future__ import annotations

import atexit
import json
import os
import sys

from ds4spec.cli import main
from ds4spec.policy.copying import LookupGate
from ds4spec.policy.triggers import TriggerPolicy

RECORDS: list[list[object]] = []


def _plain_ms(policy: object) -> float:
    seconds = policy.plain_step_seconds()  # type: ignore[attr-defined]
    return round(seconds * 1e3, 3) if seconds else 0.0


def _wrap(cls: type, name: str) -> None:
    draft_length, observe, begin = cls.draft_length, cls.observe, cls.begin

    def traced_begin(self, context):  # type: ignore[no-untyped-def]
        begin(self, context)
        RECORDS.append([name, "begin", len(context.text or b"")])

    def traced_draft_length(self):  # type: ignore[no-untyped-def]
        k = draft_length(self)
        figure = self.copies.figure()
        RECORDS.append([name, "decide", self.copies.copy, len(self.copies._tail), getattr(self, "event", ""), k,
                        round(figure.alpha, 3), _plain_ms(self)])
        return k

    def traced_observe(self, requested, drafted, accepted, cycle_seconds, source=""):  # type: ignore[no-untyped-def]
        observe(self, requested, drafted, accepted, cycle_seconds, source)
        RECORDS.append([name, "outcome", requested, drafted, accepted, round(cycle_seconds * 1e3, 3), source])

    cls.begin, cls.draft_length, cls.observe = traced_begin, traced_draft_length, traced_observe


_wrap(LookupGate, "lookup")
_wrap(TriggerPolicy, "triggers")


def _save() -> None:
    with open(os.environ.get("TRACE", "/tmp/trace.json"), "w") as out:
        json.dump(RECORDS, out)


atexit.register(_save)
sys.exit(main(sys.argv[1:]))
