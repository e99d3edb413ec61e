"""Fenced code blocks in Markdown answers: finding them whole (``/copy``) and line by line (streamed output)."""

from __future__ import annotations

import re
from dataclasses import dataclass

# CommonMark: up to three spaces, then at least three backticks or tildes; an info string may follow.
FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*?)[ \t]*$")


@dataclass(frozen=True)
class CodeBlock:
    fence: str  # the opening fence, as in ```` ``` ```` or ``~~~~``
    language: str  # the first word of the info string, "" when there is none
    code: str  # without the fences; ends with a newline unless the answer stopped inside the block
    closed: bool
    info: str = ""  # the whole info string, as in ``python greet.py``
    line: int = 0  # the opening fence's line in the text, from 0


def opening(line: str) -> tuple[str, str] | None:
    """``(fence, language)`` when ``line`` opens a fenced block, else None."""
    opened = opening_info(line)
    return None if opened is None else (opened[0], _language(opened[1]))


def opening_info(line: str) -> tuple[str, str] | None:
    """``(fence, info string)`` when ``line`` opens a fenced block, else None."""
    match = FENCE.match(line.rstrip("\n"))
    return None if match is None else (match["fence"], match["info"])


def _language(info: str) -> str:
    words = info.split()
    return words[0] if words else ""


def closes(line: str, fence: str) -> bool:
    """Whether ``line`` closes a block opened by ``fence`` (same character, at least as long, nothing after)."""
    stripped = line.rstrip("\n").rstrip()
    bare = stripped.lstrip(" ")
    return (len(stripped) - len(bare) <= 3 and bare.startswith(fence)
            and set(bare) == {fence[0]})


def code_blocks(text: str) -> list[CodeBlock]:
    """Every fenced block in ``text`` in order; a block the text ends inside counts, marked not ``closed``."""
    blocks: list[CodeBlock] = []
    fence: str | None = None
    language = info = ""
    start = 0
    lines: list[str] = []
    for number, line in enumerate(text.splitlines(keepends=True)):
        if fence is None:
            opened = opening_info(line)
            if opened:
                (fence, info), start = opened, number
                language = _language(info)
                lines = []
        elif closes(line, fence):
            blocks.append(CodeBlock(fence, language, "".join(lines), True, info, start))
            fence = None
        else:
            lines.append(line)
    if fence is not None:
        blocks.append(CodeBlock(fence, language, "".join(lines), False, info, start))
    return blocks
