"""A chat session over an ``Engine``, stored as it happens: what ``ds4spec chat`` and ``ds4spec repl`` drive.

It holds no screen code. ``send`` checks the message before anything is stored (an empty message, or a
conversation that no longer fits the context, raises ``InputError`` and the face keeps the text in its
input), stores the user message, then streams the answer, storing each chunk before it is handed on, so
that whatever a face has shown is in the session file even if the process is killed the next moment.

The model sees the system prompt (when set) and every turn whose answer is done or cancelled (a cancelled
answer is kept as far as it got); a turn whose answer failed with an error is left out of the prompt. The
files in the conversation (``conversation_files``) come in front of the newest message; what the face should
tell the user about them (a file re-read or gone) waits in ``take_notes``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ds4spec.backend.prompt import ChatMessage
from ds4spec.core.events import Event, Finished, FinishReason, TextChunk
from ds4spec.core.stats import GenerationStats
from ds4spec.engine.context_files import with_files
from ds4spec.engine.engine import FIT_HINT, Engine, Prompt
from ds4spec.errors import InputError
from ds4spec.faces.shared.conversation_files import AddedFiles, SentFiles, mentioned
from ds4spec.faces.shared.fences import code_blocks
from ds4spec.faces.shared.files import FileSnapshot
from ds4spec.faces.shared.sessions import SessionStore, StoredMessage
from ds4spec.faces.shared.stats_text import from_dict

_SEEN = ("done", "cancelled", "streaming")  # streaming: left so by a killed process, kept as shown


def _never() -> bool:
    return False


class Conversation:
    def __init__(self, engine: Engine | None, store: SessionStore, session_id: int | None = None) -> None:
        """Resumes ``session_id``, or starts a new session; ``engine`` may be attached later (models load
        in the background), but ``send`` needs it."""
        self.engine = engine
        self.store = store
        if session_id is None:
            self.session_id = store.new_session()
        else:
            if not store.exists(session_id):
                raise InputError(f"there is no session {session_id}; `ds4spec repl --sessions` lists them")
            self.session_id = session_id
            store.settle(session_id)
        stored = store.stats(self.session_id)
        self.last_stats: GenerationStats | None = from_dict(stored[-1]) if stored else None
        self.last_finish: FinishReason | None = None
        self.files = AddedFiles(store, self.session_id)
        self._notes = self.files.reopen()

    # -- what was said ----------------------------------------------------------------------------------

    def history(self) -> list[StoredMessage]:
        return self.store.messages(self.session_id)

    @property
    def system(self) -> str | None:
        return self.store.system(self.session_id)

    def take_notes(self) -> list[str]:
        """What happened to the files in the conversation since the face last asked (re-read, gone)."""
        notes, self._notes = self._notes, []
        return notes

    def messages(self, upcoming: str | None = None, attached: Sequence[FileSnapshot] = ()) -> list[ChatMessage]:
        """What the model sees: the system prompt, then each user message (with the files it attached) followed
        by a kept answer; with ``upcoming``, that message after the files in the conversation and ``attached``."""
        out: list[ChatMessage] = []
        system = self.system
        if system:
            out.append(ChatMessage("system", system))
        pending: StoredMessage | None = None
        for m in self.history():
            if m.role == "user":
                pending = m  # a user message counts only once an answer follows it
            elif m.role == "assistant" and pending is not None:
                if m.status in _SEEN:
                    sent_with = [f.context() for f in SentFiles.from_json(pending.files).attached]
                    out += [ChatMessage("user", with_files(sent_with, pending.content)),
                            ChatMessage("assistant", m.content)]
                pending = None
        if upcoming is not None:
            files = [*self.files.snapshots.values(), *attached]
            out.append(ChatMessage("user", with_files([f.context() for f in files], upcoming)))
        return out

    # -- talking ----------------------------------------------------------------------------------------

    def send(self, text: str, cancelled: Callable[[], bool] = _never) -> Iterator[Event]:
        """Stores ``text`` and returns the answer's events; the answer is stored chunk by chunk as it is read.

        Raises ``InputError`` here, before anything is stored, for an empty message, a missing engine or a
        conversation that no longer fits. The stream ends with one ``Finished``. A Ctrl-C while it is read
        (or ``KeyboardInterrupt`` thrown into it with ``throw``) ends it with ``Finished(CANCELLED)`` and the
        statistics so far; closing it early also leaves the answer stored as ``cancelled`` with its text.
        """
        if not text.strip():
            raise InputError("the message is empty")
        _check_utf8(text)
        if self.engine is None:
            raise InputError("the model is still loading")
        self._notes += self.files.refresh()
        attached = mentioned(text, skip=set(self.files.snapshots))
        hint = "/drop a file, shorten the message or raise --ctx" if self.files.snapshots or attached else FIT_HINT
        prompt = self.engine.chat_prompt(self.messages(text, attached), hint)
        self.store.add_message(self.session_id, "user", text, files=self.files.sent(attached).as_json())
        answer = self.store.add_message(self.session_id, "assistant", "", status="streaming")
        return self._stream(self.engine, prompt, answer, cancelled)

    def _stream(self, engine: Engine, prompt: Prompt, answer: int, cancelled: Callable[[], bool]) -> Iterator[Event]:
        events = engine.generate(prompt, cancelled=cancelled)
        settled = False  # the answer's final status is stored (always before ``Finished`` is handed on)
        interrupt = False
        try:
            while True:
                try:
                    event = events.throw(KeyboardInterrupt()) if interrupt else next(events)
                except StopIteration:
                    break
                except KeyboardInterrupt:  # the engine was past the point where it turns Ctrl-C into a stop
                    event = Finished(FinishReason.CANCELLED, GenerationStats(len(prompt.tokens)))
                interrupt = False
                try:
                    if isinstance(event, TextChunk):
                        self.store.append(answer, event.text)  # stored before shown
                    elif isinstance(event, Finished):
                        self._settle(answer, event)
                        settled = True
                    yield event
                except KeyboardInterrupt:
                    # Ctrl-C landed here or in the face (thrown in with ``throw``) rather than in llama.cpp:
                    # passed on to the engine, it stops there and reports the statistics so far.
                    interrupt = True
                if settled:
                    return
        finally:
            events.close()  # type: ignore[attr-defined]
            if not settled:
                # The face stopped reading (GeneratorExit: the answer was cut short) or the engine failed.
                exc = sys.exc_info()[1]
                status = "cancelled" if exc is None or isinstance(exc, GeneratorExit) else "error"
                self.last_finish = FinishReason.CANCELLED if status == "cancelled" else None
                self.store.set_status(answer, status)

    def _settle(self, answer: int, finished: Finished) -> None:
        self.last_stats, self.last_finish = finished.stats, finished.reason
        status = "cancelled" if finished.reason is FinishReason.CANCELLED else "done"
        self.store.set_status(answer, status, dict(finished.stats.as_dict()))

    # -- commands ---------------------------------------------------------------------------------------

    def new(self) -> None:
        """Starts a new session with the same system prompt and files; the old one stays in the store."""
        self.session_id = self.store.new_session(self.system)
        self.store.add_files(self.session_id, [str(p) for p in self.files.snapshots])
        self.files.session_id = self.session_id
        self.last_stats = None

    def clear(self) -> None:
        self.store.clear(self.session_id)
        self.last_stats = None

    def set_system(self, text: str | None) -> None:
        self.store.set_system(self.session_id, text)

    def save_markdown(self, path: Path) -> Path:
        """Writes the conversation as Markdown (system prompt, then each message under a heading)."""
        path = Path(path).expanduser()
        parts = [f"# ds4spec session {self.session_id}\n"]
        if self.system:
            parts.append(f"## System\n\n{self.system}\n")
        for m in self.history():
            heading = {"user": "You", "assistant": "Assistant"}.get(m.role, m.role.title())
            note = "" if m.status == "done" else f" ({m.status})"
            body = m.content if m.content.endswith("\n") else m.content + "\n"
            blocks = code_blocks(m.content)
            if blocks and not blocks[-1].closed:
                body += blocks[-1].fence + "\n"  # an answer cut off inside a code block: close it
            parts.append(f"## {heading}{note}\n\n{body}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(parts), encoding="utf-8")
        return path

    def last_code_block(self) -> str | None:
        """The last fenced code block in the most recent answer that has one."""
        for m in reversed(self.history()):
            if m.role == "assistant":
                blocks = code_blocks(m.content)
                if blocks:
                    return blocks[-1].code
        return None

    def last_answer(self) -> str | None:
        for m in reversed(self.history()):
            if m.role == "assistant" and m.content:
                return m.content
        return None


def _check_utf8(text: str) -> None:
    """A message read from bytes that are not UTF-8 (a pipe into the REPL) holds their escapes, which no prompt can
    encode: refused here, before anything is stored, as ``complete`` refuses such input."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        code = ord(text[err.start])
        byte = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
        raise InputError(f"the message is not UTF-8 text ({byte} at character {err.start})") from None
