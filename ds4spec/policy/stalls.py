"""Scheduler stalls: a measurement far above what was expected is taken for one, not for what the thing costs.

A busy machine (another process, a VM's host) stops the generating thread for 100 ms now and then, where a small target
steps in a millisecond or two and a drafter catches up in less. Taken whole, one such stall in a length's first cycle
or in a drafter's read priced drafting at dozens of plain steps; the policy stopped asking, and its probes, each
waiting longer the more a rejected one was priced to lose, never came again in the answer (a suite run on a 2-core
VM: an always-right drafter asked 5 times in 96 tokens, where it is asked every cycle; reproduced with one 100 ms
sleep injected into 3% of its reads). So a length's first cycle and a drafter's read that look like a stall are learned
as nothing unless the next one looks the same (a dear drafter stays dear), and a cost already learned moves by a stall
counted as ``OUTLIER`` times it.
"""

from __future__ import annotations

OUTLIER = 3.0  # a measurement above this many times the estimate counts as this many


def bounded(seconds: float, expected: float) -> float:
    """``seconds`` measured where ``expected`` was estimated, a stall counted as ``OUTLIER`` times the estimate."""
    return min(seconds, OUTLIER * expected)


def stalled(seconds: float, expected: float) -> bool:
    """Whether ``seconds`` measured where ``expected`` was estimated looks like a stall."""
    return seconds > OUTLIER * expected
