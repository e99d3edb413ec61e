"""Reading the next message: prompt-toolkit's editor on a capable terminal, plain ``input()`` otherwise.

In the editor Enter sends; Alt-Enter (or Esc then Enter, the same keys to a terminal) starts a new line;
pasted text keeps its newlines. Up and Down walk the history, kept in ``data_dir()/repl_history``; Tab
completes slash commands, and paths after ``/add``, ``/drop``, ``/apply``, ``/undo`` and after an ``@``.
Ctrl-C discards the line being typed (``KeyboardInterrupt``), Ctrl-D on an empty
line ends the session (``EOFError``). On ``TERM=dumb`` or when stdin is not a terminal, each line is one
message and no escape sequence is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.lexers import PygmentsLexer
from prompt_toolkit.output import ColorDepth
from prompt_toolkit.shortcuts import confirm
from pygments.lexers.markup import MarkdownLexer

from ds4spec.faces.repl.render import Terminal
from ds4spec.faces.shared.slash import ARGUMENTS, COMMANDS
from ds4spec.paths import data_dir

try:
    import termios
except ImportError:  # Windows: no termios, and its console does not echo while a program writes
    termios = None  # type: ignore[assignment]

PROMPT = "you> "
CONTINUATION = "... "
_COMMAND_SO_FAR = re.compile(r"^\s*/(\w*)$")
_PATH_SO_FAR = re.compile(r"^\s*/(?:add|drop|apply|undo)\s+(?:.*\s)?(\S*)$|(?<!\S)@(\S*)$", re.DOTALL)


class InputCompleter(Completer):
    """Completes a command name typed at the start of the message, and a path where one is expected."""

    def __init__(self) -> None:
        self._paths = PathCompleter(expanduser=True)

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        before = document.text_before_cursor
        match = _COMMAND_SO_FAR.match(before)
        if match:
            typed = match.group(1)
            for name, text in COMMANDS.items():
                if name.startswith(typed):
                    yield Completion(name, start_position=-len(typed),
                                     display=f"/{name} {ARGUMENTS.get(name, '')}", display_meta=text)
            return
        match = _PATH_SO_FAR.search(before)
        if match:
            word = match.group(1) if match.group(1) is not None else match.group(2)
            yield from self._paths.get_completions(Document(word), complete_event)


def history_path() -> Path:
    return data_dir() / "repl_history"


class Reader:
    """``read(default)`` returns the next message; ``default`` pre-fills the editor (a message kept after
    an error). Raises ``KeyboardInterrupt`` for Ctrl-C and ``EOFError`` for Ctrl-D or the end of input."""

    def __init__(self, terminal: Terminal) -> None:
        self.terminal = terminal
        self._session: PromptSession[str] | None = None
        if terminal.interactive:
            path = history_path()
            path.parent.mkdir(parents=True, exist_ok=True)
            self._session = PromptSession(
                history=FileHistory(str(path)),
                multiline=False,  # Enter sends; the binding below adds lines
                key_bindings=_bindings(),
                lexer=PygmentsLexer(MarkdownLexer) if terminal.color else None,
                completer=InputCompleter(),
                complete_while_typing=False,
                prompt_continuation=lambda width, line, wrap: CONTINUATION.rjust(width),
                color_depth=None if terminal.color else ColorDepth.DEPTH_1_BIT,
                enable_history_search=False,
            )

    @property
    def keeps_text(self) -> bool:
        """Whether a message that could not be sent can be offered again in the next prompt."""
        return self._session is not None

    def read(self, default: str = "") -> str:
        if self._session is None:
            return input(PROMPT)
        return self._session.prompt(PROMPT, default=default)

    def confirm(self, question: str) -> bool:
        """A yes or no: y or n in the editor; a line starting with y otherwise."""
        if self._session is None:
            return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
        return confirm(question)


def _bindings() -> KeyBindings:
    kb = KeyBindings()

    @kb.add("escape", "enter")  # Alt-Enter reaches the program as Esc followed by Enter
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    return kb


@contextmanager
def streaming_terminal(stdin: TextIO) -> Iterator[None]:
    """While an answer streams: the terminal does not echo keys into it (nor ``^C`` for Ctrl-C); keys typed
    meanwhile stay in its buffer and come back in the next prompt. And Ctrl-C does not flush the terminal's
    queues (``NOFLSH``): by default it drops output written but not yet displayed, so text the session
    stored would never reach the screen."""
    if termios is None or not stdin.isatty():
        yield
        return
    fd = stdin.fileno()
    saved = termios.tcgetattr(fd)
    quiet = list(saved)
    quiet[3] = (quiet[3] & ~termios.ECHO) | termios.NOFLSH  # the local-modes word
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)
