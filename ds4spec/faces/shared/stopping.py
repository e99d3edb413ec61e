"""Ending an editor's option at the end of a line or of a block, and a JSON answer at the end of its value, as the
text streams in.

An inline suggestion should be one coherent piece: ``line`` ends it at the end of the first line that holds
text; ``block`` ends it before the first line that leaves the block where it began (a line indented less
than the block, or, at the top level, a line that follows a blank line). Text is released as soon as it is
certain to stay, so partial results never show something the final one takes back; trailing whitespace
held back when generation ends is dropped. ``json`` ends an answer asked for as JSON once its value is whole
(``line_head``: what the answer opened with), so that nothing the model adds after it reaches the client.
"""

from __future__ import annotations

import json

TAB_WIDTH = 8
_JSON = json.JSONDecoder()


def decide(text: str, mode: str | None, line_head: str = "") -> tuple[int, bool]:
    """How many leading characters of ``text`` are final, and whether the option ends there.

    ``line_head`` is the cursor's line up to the cursor: the output's first line continues it.
    """
    if mode is None:
        return len(text), False
    if mode == "line":
        return _line(text)
    if mode == "block":
        return _block(text, line_head)
    if mode == "json":
        return _json(text, line_head)
    raise ValueError(f"unknown stop_at mode {mode!r}")


def _line(text: str) -> tuple[int, bool]:
    first = len(text) - len(text.lstrip())
    if first == len(text):
        return 0, False  # only whitespace so far: nothing is certain
    end = text.find("\n", first)
    return (end, True) if end >= 0 else (len(text), False)


def _block(text: str, line_head: str) -> tuple[int, bool]:
    base: int | None = None  # the block's indentation, from its first line that holds text
    kept = 0
    blank_after_text = False
    lines = text.split("\n")
    start = 0
    for i, line in enumerate(lines):
        end = start + len(line)
        body = line_head + line if i == 0 else line
        if not body.strip():
            if base is not None and i < len(lines) - 1:
                blank_after_text = True
            start = end + 1
            continue
        indent = _width(body)
        if base is None:
            base = indent
        elif indent < base or (base == 0 and indent == 0 and blank_after_text):
            return kept, True
        kept, blank_after_text = end, False
        start = end + 1
    return kept, False


def _json(text: str, head: str) -> tuple[int, bool]:
    whole = head + text
    start = len(whole) - len(whole.lstrip())
    if not whole.startswith("{", start):  # an answer that is no object (words, a call's tag) goes on to its end
        return len(text), False
    try:
        _, end = _JSON.raw_decode(whole, start)
    except (ValueError, RecursionError):  # not whole yet, or no JSON after all: everything so far stays
        return len(text), False
    return max(end - len(head), 0), True


def _width(line: str) -> int:
    head = line[: len(line) - len(line.lstrip(" \t"))]
    return len(head.expandtabs(TAB_WIDTH))


class Stopper:
    """Feeds committed text through ``decide``; says what may be shown now and when to stop generating."""

    def __init__(self, mode: str | None, line_head: str = "") -> None:
        self._mode = mode
        self._head = line_head
        self._text = ""
        self._sent = 0
        self.done = False

    def feed(self, delta: str) -> str:
        """Adds ``delta``; returns the text that became final (sets ``done`` when the option ends)."""
        if self.done:
            return ""
        self._text += delta
        final, self.done = decide(self._text, self._mode, self._head)
        out = self._text[self._sent:final]
        self._sent = final
        return out

    @property
    def text(self) -> str:
        """The option as it stands: everything final (held-back trailing whitespace is not part of it)."""
        return self._text[: self._sent]
