"""Model output and stored titles made safe to draw, in the chat and in the terminal alike.

Model output may hold control characters (ESC, CR, a bell, C1 codes such as CSI) that a terminal would obey
rather than show: each becomes a visible symbol (C0 and DEL their Unicode "control pictures", C1 U+FFFD).
Newlines and tabs stay as they are.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _symbol(m: re.Match[str]) -> str:
    code = ord(m.group())
    return chr(0x2400 + code) if code < 0x20 else "\u2421" if code == 0x7F else "\ufffd"


def visible(text: str) -> str:
    return _CONTROL.sub(_symbol, text)
