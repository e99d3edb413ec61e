"""Turns committed token bytes into text that is safe to show: whole UTF-8 characters, stop strings cut.

Tokens are bytes, and a token may end in the middle of a multi-byte character; a stop string may span
several tokens. So text is released only once it can no longer change: incomplete characters wait for
their remaining bytes, and a tail that could still grow into a stop string waits until it cannot.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(slots=True)
class Released:
    text: str  # text that is final and may be written out
    stopped: bool  # a stop string appeared; nothing after ``text`` belongs to the output


class TextAssembler:
    def __init__(self, stop: Sequence[str] = ()) -> None:
        self._stops = [s for s in stop if s]
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._held = ""  # decoded text that might be the start of a stop string
        self.stopped = False

    def feed(self, data: bytes) -> Released:
        """Adds the bytes of newly committed tokens."""
        if self.stopped:
            return Released("", True)
        return self._release(self._held + self._decoder.decode(data), final=False)

    def finish(self) -> Released:
        """The end of generation: releases everything held (an unfinished character becomes U+FFFD)."""
        if self.stopped:
            return Released("", True)
        return self._release(self._held + self._decoder.decode(b"", final=True), final=True)

    @property
    def pending_text(self) -> str:
        """Text decoded but not yet released (a possible stop-string prefix)."""
        return self._held

    def _release(self, text: str, *, final: bool) -> Released:
        cut = self._first_stop(text)
        if cut is not None:
            self.stopped = True
            self._held = ""
            return Released(text[:cut], True)
        hold = 0 if final else self._longest_stop_prefix_suffix(text)
        self._held = text[len(text) - hold :] if hold else ""
        return Released(text[: len(text) - hold], False)

    def _first_stop(self, text: str) -> int | None:
        found = [i for i in (text.find(s) for s in self._stops) if i >= 0]
        return min(found) if found else None

    def _longest_stop_prefix_suffix(self, text: str) -> int:
        """Length of the longest suffix of ``text`` that is a proper prefix of some stop string."""
        best = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(text)), best, -1):
                if text.endswith(stop[:n]):
                    best = n
                    break
        return best
