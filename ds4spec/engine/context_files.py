"""Files put before a message or a prompt: how the model is shown them, the same for every face and the bench.

Each file is its name on a line, then its text in a fenced block tagged with its language (from the file
name, as pygments knows it). Answers then name a file the same way, which is how ``/apply`` finds the file a
block belongs to, and the lookup drafter has the file's lines to draft from when the answer copies them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pygments.lexers import get_lexer_for_filename
from pygments.util import ClassNotFound

HEADING = "Files in the conversation:"
_BACKTICKS = re.compile(r"`{3,}")


@dataclass(frozen=True, slots=True)
class ContextFile:
    name: str  # how the model (and the user) sees the path: relative to the working directory when under it
    text: str


def language_of(name: str, text: str = "") -> str:
    """The fence tag for a file: pygments' first alias for its name (``python``, ``rust``), else ""."""
    try:
        lexer = get_lexer_for_filename(name, text)
    except ClassNotFound:
        return ""
    return str(lexer.aliases[0]) if lexer.aliases else ""


def fenced(name: str, text: str) -> str:
    """``name``, then ``text`` fenced; the fence is longer than any run of backticks in the text, so that a
    Markdown file holding code blocks stays one block."""
    longest = max((len(m.group()) for m in _BACKTICKS.finditer(text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{name}\n{fence}{language_of(name, text)}\n{body}{fence}\n"


def render_files(files: Sequence[ContextFile]) -> str:
    """The files as the model sees them; "" for none."""
    if not files:
        return ""
    return HEADING + "\n\n" + "\n".join(fenced(f.name, f.text) for f in files)


def with_files(files: Sequence[ContextFile], text: str) -> str:
    """``text`` after the files it is about."""
    rendered = render_files(files)
    return f"{rendered}\n{text}" if rendered else text
