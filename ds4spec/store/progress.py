"""A byte progress bar on stderr for downloads and hashing, and a hook for interfaces that draw their own."""

from __future__ import annotations

import sys
from collections.abc import Callable

# Called with (label, bytes done, bytes in all) after every step, so that a full-screen interface (the chat)
# can draw the progress of the same pull and verify code that ``ds4spec models pull`` runs.
ProgressListener = Callable[[str, int, int], None]


class ByteProgress:
    """A byte progress bar on stderr: rich's on a terminal, otherwise one line per 10%."""

    def __init__(self, label: str, total: int, enabled: bool = True,
                 listener: ProgressListener | None = None) -> None:
        self.label = label
        self.total = max(total, 1)
        self.done = 0
        self.enabled = enabled
        self.listener = listener
        self._rich = None
        self._task = None
        self._next_pct = 10
        if enabled and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self._rich = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
            )
            self._rich.start()
            self._task = self._rich.add_task(label, total=self.total)

    def advance(self, n: int) -> None:
        self.done += n
        if self.listener is not None:
            self.listener(self.label, self.done, self.total)
        if not self.enabled:
            return
        if self._rich is not None:
            self._rich.update(self._task, completed=self.done)
            return
        pct = self.done * 100 // self.total
        if pct >= self._next_pct:
            self._next_pct = (min(pct, 100) // 10 + 1) * 10
            mib = float(1 << 20)
            print(
                f"{self.label}: {min(pct, 100)}% ({self.done / mib:.1f}/{self.total / mib:.1f} MiB)",
                file=sys.stderr,
                flush=True,
            )

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()
            self._rich = None
