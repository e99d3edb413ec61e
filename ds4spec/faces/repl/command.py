"""``ds4spec repl``: a line-oriented chat in the terminal, stored as a session like ``ds4spec chat``.

Answers stream as they are generated; a statistics line follows each one. Ctrl-C while an answer streams
stops it (what was shown is kept in the session and in what the model sees next); Ctrl-C at the prompt
discards the line being typed; Ctrl-D at an empty prompt leaves. Generation runs on the main thread: the
first Ctrl-C asks the engine to stop before its next cycle or prompt chunk (``StopRequest``), so every
chunk stored is also shown; a second one raises at once and the conversation records the answer as
cancelled all the same.
"""

from __future__ import annotations

import argparse
import base64
import sys
from collections.abc import Iterator

from ds4spec.core.events import Event, Finished, FinishReason, TextChunk
from ds4spec.engine.engine import Engine
from ds4spec.engine.loading import check_settings
from ds4spec.engine.options import settings_from_args
from ds4spec.errors import Ds4Error, InputError
from ds4spec.faces.repl.input import Reader, streaming_terminal
from ds4spec.faces.repl.render import StreamRenderer, Terminal, diff_text
from ds4spec.faces.shared.conversation import Conversation
from ds4spec.faces.shared.session_options import (
    add_chat_options,
    print_sessions,
    session_store,
    session_to_resume,
)
from ds4spec.faces.shared.slash import CommandResult, Confirmation, is_command, run_command
from ds4spec.faces.shared.stats_text import answer_line
from ds4spec.faces.shared.stop_request import StopRequest
from ds4spec.faces.shared.visible import visible

RESUME_SHOWS = 10  # messages of a resumed session printed before the prompt


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "repl",
        help="chat in the terminal, line by line",
        description="Chat with the target in the terminal. Enter sends; Alt-Enter (or Esc, Enter) adds a line; "
                    "Ctrl-C stops an answer; Ctrl-D exits; /help lists the commands. Sessions are saved.",
    )
    add_chat_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    check_settings(settings)
    term = Terminal.detect()
    with session_store() as store:
        if args.sessions:
            print_sessions(store)
            return 0
        session_id = session_to_resume(store, args.resume, "repl")
        with Engine.load(settings) as engine:
            conv = Conversation(engine, store, session_id)
            return Repl(conv, term).loop()


class Repl:
    def __init__(self, conv: Conversation, term: Terminal) -> None:
        self.conv = conv
        self.term = term
        self.reader = Reader(term)
        self.out = sys.stdout

    def loop(self) -> int:
        self._banner()
        kept = ""  # a message that could not be sent, offered again
        while True:
            try:
                line = self.reader.read(kept)
            except KeyboardInterrupt:
                self._note("(Ctrl-D exits)")
                kept = ""
                continue
            except EOFError:
                self._write("\n" if self.term.interactive else "")
                return 0
            kept = ""
            if is_command(line):
                self._command(line)
            elif not line.strip():
                self._note("(empty message: nothing sent)")
            else:
                kept = self._ask(line)

    def _ask(self, text: str) -> str:
        """Sends ``text`` and streams the answer; returns the text when it could not be sent."""
        stop = StopRequest()
        try:
            stream = self.conv.send(text, cancelled=stop)
        except InputError as err:
            self._file_notes()
            kept = " it is back in the prompt to edit" if self.reader.keeps_text else " it was not sent"
            self._note(f"ds4spec: {err};{kept}")
            return text if self.reader.keeps_text else ""
        self._file_notes()
        renderer = StreamRenderer(self.term.color)
        with stop, streaming_terminal(sys.stdin):
            finished = self._stream(stream, renderer)
        self._write(renderer.finish())
        if not renderer.ends_with_newline:
            self._write("\n")
        if finished is None or finished.reason is FinishReason.CANCELLED:
            self._note("(stopped; the answer so far is kept)")
        if finished is not None and self.conv.last_stats is not None:
            self._note(f"[{answer_line(finished.stats, finished.reason.value)}]")
        return ""

    def _stream(self, stream: Iterator[Event], renderer: StreamRenderer) -> Finished | None:
        """Writes the answer as it comes. A first Ctrl-C asks the engine to stop (``StopRequest``); a second
        one raises here and is thrown into the stream, which stops the generation and still ends with the
        statistics so far."""
        interrupted = False
        while True:
            try:
                event = stream.throw(KeyboardInterrupt()) if interrupted else next(stream)  # type: ignore[attr-defined]
                interrupted = False
                if isinstance(event, TextChunk):
                    self._write(renderer.feed(event.text))
                elif isinstance(event, Finished):
                    return event
            except StopIteration:
                return None
            except KeyboardInterrupt:
                interrupted = True

    def _command(self, line: str) -> None:
        try:
            result = run_command(line, self.conv)
        except Ds4Error as err:
            self._note(f"ds4spec: {err}")
            return
        except KeyboardInterrupt:  # while /draft loads a model, say: the old drafter stays
            self._note("(interrupted)")
            return
        self._show(result)

    def _show(self, result: CommandResult) -> None:
        if result.clipboard is not None:
            if self.term.dumb or not self.term.interactive:
                text = visible(result.clipboard)
                self._write(text + ("" if text.endswith("\n") else "\n"))
                self._note("(no clipboard on this terminal: the text is above)")
                return
            data = base64.b64encode(result.clipboard.encode("utf-8")).decode("ascii")
            self._write(f"\x1b]52;c;{data}\x07")  # OSC 52: the terminal puts it on the clipboard
        self._note(result.message)
        if result.confirm is not None:
            self._confirm(result.confirm)

    def _confirm(self, confirm: Confirmation) -> None:
        """Shows the change, asks, and makes it only on a yes; Ctrl-C or Ctrl-D is a no."""
        self._write(diff_text(confirm.diff, self.term.color))
        try:
            yes = self.reader.confirm(confirm.question)
        except (KeyboardInterrupt, EOFError):
            yes = False
        if not yes:
            self._note("nothing was written")
            return
        try:
            self._note(confirm.accept())
        except Ds4Error as err:
            self._note(f"ds4spec: {err}")

    def _file_notes(self) -> None:
        for note in self.conv.take_notes():
            self._note(note)

    def _banner(self) -> None:
        engine = self.conv.engine
        assert engine is not None
        drafter = f"drafter {engine.drafter_name}" if engine.speculating else "plain decoding"
        self._note(f"ds4spec repl · {engine.target_name} · {drafter} · session {self.conv.session_id}")
        if self.term.interactive:
            self._note("Enter sends, Alt-Enter adds a line, Ctrl-C stops an answer, Ctrl-D exits, /help lists commands")
        history = self.conv.history()
        if history:
            if len(history) > RESUME_SHOWS:
                self._note(f"({len(history) - RESUME_SHOWS} earlier messages)")
            for m in history[-RESUME_SHOWS:]:
                who = "you" if m.role == "user" else m.role
                note = "" if m.status == "done" else f" ({m.status})"
                self._write(f"{self.term.dim(who + note + ':')} {visible(m.content).rstrip()}\n")
        files = [s.name for s in self.conv.files.snapshots.values()]
        if files:
            self._note(f"files in the conversation: {', '.join(files)}")
        self._file_notes()

    def _note(self, text: str) -> None:
        self._write(self.term.dim(visible(text)) + "\n")

    def _write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()
