"""What the REPL writes: the answer as it streams, with fenced code highlighted, and nothing a terminal would
take for a command.

Text outside code blocks is written the moment it arrives. A line that may open a fence (it starts with
backticks or tildes) is held until it ends. Inside a block each line is held until it is complete, then
written highlighted by Pygments for the fence's language (the whole block so far is lexed, so a string
spanning lines keeps its colour). Without colour (``NO_COLOR``, ``TERM=dumb``, output not a terminal)
everything is written as it arrives and no escape sequence is ever written. Control characters in the
model's text are always shown as visible symbols: an answer must not be able to drive the terminal.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import TextIO

import pygments
import pygments.lexers
import pygments.util
from pygments.formatters import TerminalFormatter
from pygments.lexer import Lexer

from ds4spec.faces.shared.fences import closes, opening
from ds4spec.faces.shared.visible import visible

DIM, RESET = "\x1b[2m", "\x1b[0m"
_MAY_OPEN_FENCE = re.compile(r"^ {0,3}(`|~)")
_LEADING_SPACES = re.compile(r"^ {0,3}$")


@dataclass(frozen=True)
class Terminal:
    """What the terminal can take. ``dumb``: no escape sequences at all, and input is read with ``input()``."""

    color: bool
    dumb: bool
    interactive: bool  # stdin and stdout are terminals: the prompt-toolkit editor can run

    @classmethod
    def detect(cls, stdin: TextIO | None = None, stdout: TextIO | None = None) -> Terminal:
        stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
        dumb = os.environ.get("TERM", "") == "dumb"
        tty = stdin.isatty() and stdout.isatty()
        color = tty and not dumb and not os.environ.get("NO_COLOR")  # https://no-color.org: any value
        return cls(color=color, dumb=dumb, interactive=tty and not dumb)

    def dim(self, text: str) -> str:
        return f"{DIM}{text}{RESET}" if self.color else text


def lexer_for(language: str) -> Lexer:
    try:
        return pygments.lexers.get_lexer_by_name(language or "text", stripnl=False, ensurenl=True)
    except pygments.util.ClassNotFound:
        return pygments.lexers.TextLexer(stripnl=False, ensurenl=True)


class StreamRenderer:
    """Turns answer text, chunk by chunk, into what to write; ``finish`` flushes what is held."""

    def __init__(self, color: bool) -> None:
        self.color = color
        self._line = ""  # the current line's text not written yet
        self._started = False  # part of the current line was already written
        self._fence: str | None = None
        self._lexer: Lexer | None = None
        self._block: list[str] = []
        self._formatter = TerminalFormatter()
        self.ends_with_newline = True

    def feed(self, text: str) -> str:
        text = visible(text)
        if not text:
            return ""
        if not self.color:
            self.ends_with_newline = text.endswith("\n")
            return text
        out: list[str] = []
        self._line += text
        while "\n" in self._line:
            line, self._line = self._line.split("\n", 1)
            out.append(self._whole_line(line + "\n"))
            self._started = False
        if self._line and self._fence is None and (self._started or not self._may_open_fence(self._line)):
            out.append(self._line)  # plain prose: written at once
            self._line, self._started = "", True
        written = "".join(out)
        if written:
            self.ends_with_newline = written.endswith("\n")
        return written

    def finish(self) -> str:
        """What is still held (a partial last line), with colours reset."""
        if not self.color:
            return ""
        tail = self._line
        if tail and self._fence is not None:
            tail = self._highlight(tail).rstrip("\n")
        self._line, self._started, self._fence = "", False, None
        if tail:
            self.ends_with_newline = False
        return tail + RESET if tail else ""

    def _may_open_fence(self, partial: str) -> bool:
        return bool(_MAY_OPEN_FENCE.match(partial) or _LEADING_SPACES.match(partial))

    def _whole_line(self, line: str) -> str:
        if self._started:  # the start of this line was prose, already written
            return line
        if self._fence is None:
            opened = opening(line)
            if opened is None:
                return line
            self._fence, language = opened
            self._lexer, self._block = lexer_for(language), []
            return f"{DIM}{line.rstrip(chr(10))}{RESET}\n"
        if closes(line, self._fence):
            self._fence = None
            return f"{DIM}{line.rstrip(chr(10))}{RESET}\n"
        return self._highlight(line)

    def _highlight(self, line: str) -> str:
        """``line`` highlighted in the context of the block so far (only ``line`` is returned)."""
        assert self._lexer is not None
        source = "".join(self._block) + line
        self._block.append(line)
        lines = pygments.highlight(source, self._lexer, self._formatter).split("\n")
        last = lines[-2] if len(lines) >= 2 else lines[-1]
        return last + RESET + ("\n" if line.endswith("\n") else "")


def diff_text(diff: str, color: bool) -> str:
    """A unified diff for the terminal: coloured by Pygments when colour is on, control characters visible."""
    shown = visible(diff)
    if not color:
        return shown
    return pygments.highlight(shown, pygments.lexers.DiffLexer(), TerminalFormatter())
