"""What it costs a model drafter to read text it has not seen: the prompt, and what lookup or the target wrote while
it was not asked.

A drafter that waits its turn reads that text when it is next asked, inside that cycle. After lookup copied a few
hundred bytes of an edited file, or at its first draft of a chat answer whose prompt holds the file, that read costs
more than the draft (measured on the F16 pair's edits: SmolLM2 read a prompt for 0.6 to 1.2 s, 9 to 17 plain steps,
for a draft of 5 tokens). The cost is fitted as ``fixed + per_byte * bytes`` by least squares over recent reads,
the most recent weighing most: the fixed part is the forward pass that yields the draft's first token, the rest
grows with the text.
"""

from __future__ import annotations

from dataclasses import dataclass

DECAY = 0.9  # weight of a read after each newer one: a few dozen reads make the fit


class ReadingCosts:
    """Seconds to read ``n`` unseen bytes, fitted online; 0 until a read was measured."""

    def __init__(self) -> None:
        self._w = self._x = self._y = self._xx = self._xy = 0.0
        self._fit: tuple[float, float] | None = None  # a policy prices several lengths a cycle with one fit

    def observe(self, nbytes: int, seconds: float) -> None:
        self._fit = None
        self._w = DECAY * self._w + 1
        self._x = DECAY * self._x + nbytes
        self._y = DECAY * self._y + seconds
        self._xx = DECAY * self._xx + nbytes * nbytes
        self._xy = DECAY * self._xy + nbytes * seconds

    def fit(self) -> tuple[float, float]:
        """(fixed seconds, seconds per byte); reads of one size only give a cost proportional to the bytes."""
        if self._fit is None:
            self._fit = self._solve()
        return self._fit

    def _solve(self) -> tuple[float, float]:
        if self._w == 0:
            return 0.0, 0.0
        spread = self._w * self._xx - self._x * self._x
        if spread <= 1e-6 * self._w * self._xx or not self._x:
            return (0.0, self._y / self._x) if self._x else (self._y / self._w, 0.0)
        slope = max(0.0, (self._w * self._xy - self._x * self._y) / spread)
        return max(0.0, (self._y - slope * self._x) / self._w), slope

    def cost(self, nbytes: int) -> float:
        fixed, per_byte = self.fit()
        return fixed + per_byte * nbytes


@dataclass(slots=True)
class ReadText:
    """What a model drafter has read, as far as its policy can tell: a generation's prompt (its messages' contents,
    joined by new lines) and the first ``read`` bytes of the answer after it. Its cache keeps the prefix a new prompt
    shares with that text (a chat's earlier turns, an editor's file) and reads only the rest: charged all of the
    prompt, a chat's later turns priced the model's first read of each answer whole, and learned the few milliseconds
    it took as a read of every byte (F32 pair, a prompt the drafter held: 652 bytes in 1.3 ms), after which each
    later read was priced at the average read (30 to 50 ms, 0.15 to 0.25 plain steps, against the 8 ms of a pass)."""

    prompt: bytes
    answer: bytearray
    read: int = 0
    chat: bool = False

    def unread_of(self, prompt: bytes) -> int:
        """How many bytes of ``prompt`` follow the prefix it shares with this text."""
        held = self.prompt + (b"\n" if self.chat else b"") + bytes(self.answer[: self.read])
        return len(prompt) - shared_prefix(held, prompt)


def shared_prefix(a: bytes, b: bytes) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (slices compared in C: a chat's history in
    microseconds)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low
