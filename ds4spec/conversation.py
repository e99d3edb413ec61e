"""A chat session over an ``Engine``, stored as it happens: what ``ds4spec chat`` and ``ds4spec repl`` drive.

It holds no screen code. ``send`` checks the message before anything is stored (an empty message, or a
conversation that no longer fits the context, raises ``InputError`` and the face keeps the text in its
input), stores the user message, then streams the answer, storing each chunk before it is handed on, so
that whatever a face has shown is in the session file even if the process is killed the next moment.

The model sees the system prompt (when set) and every turn whose answer is done or cancelled (a cancelled
answer is kept as far as it got); a turn whose answer failed with an error is left out of the prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from ds4spec.engine import Engine, Prompt
from ds4spec.errors import InputError
from ds4spec.events import Event, Finished, FinishReason, TextChunk
from ds4spec.fences import code_blocks
from ds4spec.prompt import ChatMessage
from ds4spec.sessions import SessionStore, StoredMessage
from ds4spec.stats import GenerationStats
from ds4spec.stats_text import from_dict

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

    # -- what was said ----------------------------------------------------------------------------------

    def history(self) -> list[StoredMessage]:
        return self.store.messages(self.session_id)

    @property
    def system(self) -> str | None:
        return self.store.system(self.session_id)

    def messages(self) -> list[ChatMessage]:
        """What the model sees: the system prompt, then each user message followed by a kept answer."""
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
                    out += [ChatMessage("user", pending.content), ChatMessage("assistant", m.content)]
                pending = None
        return out

    # -- talking ----------------------------------------------------------------------------------------

    def send(self, text: str, cancelled: Callable[[], bool] = _never) -> Iterator[Event]:
        """Stores ``text`` and returns the answer's events; the answer is stored chunk by chunk as it is read.

        Raises ``InputError`` here, before anything is stored, for an empty message, a missing engine or a
        conversation that no longer fits. The stream ends with one ``Finished``; closing it early, or a
        Ctrl-C while it is read, leaves the answer stored as ``cancelled`` with the text so far.
        """
        if not text.strip():
            raise InputError("the message is empty")
        if self.engine is None:
            raise InputError("the model is still loading")
        prompt = self.engine.chat_prompt([*self.messages(), ChatMessage("user", text)])
        self.store.add_message(self.session_id, "user", text)
        answer = self.store.add_message(self.session_id, "assistant", "", status="streaming")
        return self._stream(self.engine, prompt, answer, cancelled)

    def _stream(self, engine: Engine, prompt: Prompt, answer: int, cancelled: Callable[[], bool]) -> Iterator[Event]:
        status = "error"  # what an exception out of the engine leaves; set otherwise below
        stats: GenerationStats | None = None
        events = engine.generate(prompt, cancelled=cancelled)
        try:
            for event in events:
                if isinstance(event, TextChunk):
                    self.store.append(answer, event.text)  # stored before shown
                elif isinstance(event, Finished):
                    stats, self.last_finish = event.stats, event.reason
                    status = "cancelled" if event.reason is FinishReason.CANCELLED else "done"
                yield event
        except KeyboardInterrupt:
            # Ctrl-C landed here rather than inside llama.cpp (which the engine turns into CANCELLED).
            events.close()  # type: ignore[attr-defined]
            status, self.last_finish = "cancelled", FinishReason.CANCELLED
            stats = GenerationStats(prompt_tokens=len(prompt.tokens))
            yield Finished(FinishReason.CANCELLED, stats)
        except GeneratorExit:
            events.close()  # type: ignore[attr-defined]
            if stats is None:  # the face stopped reading before the end: the answer was cut short
                status, self.last_finish = "cancelled", FinishReason.CANCELLED
            raise
        finally:
            if stats is not None:
                self.last_stats = stats
            self.store.set_status(answer, status, None if stats is None else dict(stats.as_dict()))

    # -- commands ---------------------------------------------------------------------------------------

    def new(self) -> None:
        """Starts a new session with the same system prompt; the old one stays in the store."""
        self.session_id = self.store.new_session(self.system)
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
