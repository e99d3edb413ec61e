"""Memory the bench takes before it loads any model and gives back once every system is loaded.

On the Firecracker guests ds4spec is measured on (free page reporting on, nested paging), memory that an exited
process freed is slower once taken again: the process that loaded its weights first decoded 5 to 9% slower than one
loaded after it, with the same library and settings, and 1 to 4 GiB taken first made the two equal
(``scripts/load_order.py``; docs/benchmarks.md, run 72). The bench loads ds4spec's target before its peers, so
without a ballast a peer in another process gains that for nothing, and with one every system loads into the same
kind of memory. Elsewhere it costs the memory for the time of loading, and nothing after.
"""

from __future__ import annotations

import mmap
from pathlib import Path

from ds4spec.backend.weights_memory import MEMINFO, memory_available

PAGE = 4096
AUTO_BALLAST_MIB = 4096  # 1 GiB left a 2-3% gap in a bench beside llama-server; 2 and 4 GiB closed it in two processes


def auto_ballast_mib(meminfo: Path = MEMINFO) -> int:
    """The ballast a bench with peers takes by default: ``AUTO_BALLAST_MIB``, at most a quarter of the memory
    available, none where the system does not say (not Linux)."""
    available = memory_available(meminfo)
    return 0 if available is None else min(AUTO_BALLAST_MIB, (available >> 20) // 4)


class Ballast:
    """``mib`` MiB taken from the system and written page by page (untouched pages are not really taken), until
    ``release``. A mapping of its own, not the allocator's: a ``bytearray`` in a process that had freed as much
    before reused those pages, already taken, and took nothing new (measured in the test suite's process)."""

    def __init__(self, mib: int) -> None:
        if mib < 0:
            raise ValueError(f"a ballast is at least 0 MiB, got {mib}")
        self._memory: mmap.mmap | None = mmap.mmap(-1, mib << 20) if mib else None
        if self._memory is not None:
            self._memory[::PAGE] = b"\x01" * len(range(0, len(self._memory), PAGE))

    def release(self) -> None:
        memory, self._memory = self._memory, None
        if memory is not None:
            memory.close()
