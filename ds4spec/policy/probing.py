"""When a policy tries a drafter that does not pay again: with back-off, so that it notices when the drafter becomes
useful (another kind of text) without paying for a probe every few cycles while it stays useless."""

from __future__ import annotations

FIRST_PROBE_AFTER = 8  # cycles without drafting before the first probe
MAX_PROBE_INTERVAL = 256  # the back-off doubles up to this many cycles
# The most of a lull's time that failed probes may cost: a probe that loses w plain steps waits at least w / PROBE_SHARE
# cycles. Measured on the F16 pair's prose, a SmolLM2 probe of one token cost 2.6 plain steps and was rejected 4 times
# in 5: probing every 8, 16, 32 cycles of each answer took 6% of the time (triggers 0.91x against lookup's 0.95x).
PROBE_SHARE = 0.03


class ProbeBackoff:
    def __init__(self) -> None:
        self.idle = 0
        self.probe_after = FIRST_PROBE_AFTER

    def reset(self) -> None:
        """Drafting pays (again): the next lull is watched closely."""
        self.idle = 0
        self.probe_after = FIRST_PROBE_AFTER

    def due_next(self, waste: float = 0.0) -> bool:
        """Whether the next ``due`` would say True (nothing counted)."""
        return self.idle + 1 >= self._interval(waste)

    def due(self, waste: float = 0.0) -> bool:
        """Counts one cycle without drafting; True when this one should probe (and the next probe waits longer).
        ``waste``: the plain steps a probe loses when its draft is rejected (its cycle, less the step it replaces)."""
        self.idle += 1
        interval = self._interval(waste)
        if self.idle < interval:
            return False
        self.idle = 0
        self.probe_after = max(self.probe_after, min(interval * 2, MAX_PROBE_INTERVAL))
        return True

    def _interval(self, waste: float) -> float:
        """Cycles from one probe to the next: the back-off, and at least what keeps probes' waste a share of time."""
        return max(self.probe_after, waste / PROBE_SHARE)
