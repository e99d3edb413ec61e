"""When a policy tries a drafter that does not pay again: with back-off, so that it notices when the drafter becomes
useful (another kind of text) without paying for a probe every few cycles while it stays useless."""

from __future__ import annotations

FIRST_PROBE_AFTER = 8  # cycles without drafting before the first probe
MAX_PROBE_INTERVAL = 256  # the back-off doubles up to this many cycles


class ProbeBackoff:
    def __init__(self) -> None:
        self.idle = 0
        self.probe_after = FIRST_PROBE_AFTER

    def reset(self) -> None:
        """Drafting pays (again): the next lull is watched closely."""
        self.idle = 0
        self.probe_after = FIRST_PROBE_AFTER

    def due(self) -> bool:
        """Counts one cycle without drafting; True when this one should probe (and the next probe waits longer)."""
        self.idle += 1
        if self.idle < self.probe_after:
            return False
        self.idle = 0
        self.probe_after = min(self.probe_after * 2, MAX_PROBE_INTERVAL)
        return True
