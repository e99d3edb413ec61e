"""The chat's widgets: the multi-line input and the views of messages and notes.

An assistant message is drawn two ways, and the conversation's ``-provenance`` class picks which shows (the
rule is in the app's CSS: a widget's default CSS cannot look at its ancestors):
as markdown (streamed with Textual's ``MarkdownStream``; code blocks highlighted by pygments) and as plain
text coloured by provenance.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Markdown, Static, TextArea
from textual.widgets.markdown import MarkdownStream

from ds4spec.core.events import TextChunk
from ds4spec.faces.chat.provenance import ProvenanceSpans
from ds4spec.faces.shared.visible import visible

# Terminals send Ctrl-J as a bare line feed, so it works everywhere. Shift-Enter reaches the app only in
# terminals with the kitty keyboard protocol (others send a plain Enter), but it is the key people try first.
NEWLINE_KEYS = ("ctrl+j", "shift+enter")


class ChatInput(TextArea):
    """A multi-line input where Enter sends and Ctrl-J (or Shift-Enter) starts a new line."""

    DEFAULT_CSS = """
    ChatInput {
        height: auto;
        min-height: 3;
        max-height: 10;
    }
    """
    # Listed so that the footer shows the key; _on_key handles it first.
    BINDINGS: ClassVar[list[BindingType]] = [Binding("ctrl+j", "newline", "Newline")]

    class Submitted(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, **kwargs: object) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, tab_behavior="focus",  # type: ignore[arg-type]
                         placeholder="Message · Enter sends · Ctrl-J new line · /help lists commands", **kwargs)

    async def _on_key(self, event: events.Key) -> None:
        # Before TextArea's own handling, which would insert a newline for Enter.
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.post_message(self.Submitted(self.text))
            return
        if event.key in NEWLINE_KEYS:
            event.stop()
            event.prevent_default()
            self.action_newline()
            return
        await super()._on_key(event)

    def action_newline(self) -> None:
        self.insert("\n")


class NoteView(Static):
    """A line from the chat itself (command results, problems), not part of the conversation."""

    DEFAULT_CSS = """
    NoteView { color: $text-muted; padding: 0 1; margin: 0 0 1 0; }
    NoteView.-error { color: $error; }
    """

    def __init__(self, text: str, *, error: bool = False) -> None:
        super().__init__(Text(visible(text)), classes="-error" if error else "")


class MessageView(Vertical):
    """One message. Assistant messages stream: ``start_stream``, ``append`` per chunk, then ``finish``."""

    DEFAULT_CSS = """
    MessageView { height: auto; margin: 0 0 1 0; }
    MessageView .role { color: $text-muted; text-style: bold; padding: 0 1; }
    MessageView.-user .role { color: $accent; }
    MessageView .body { padding: 0 1; }
    MessageView Markdown { margin: 0; padding: 0 1; }
    MessageView .provenance { display: none; padding: 0 1; }
    """

    def __init__(self, role: str, content: str = "", status: str = "done") -> None:
        super().__init__(classes=f"-{role}")
        self.role = role
        self.status = status
        self.spans = ProvenanceSpans()
        self.spans.add(content, None)  # provenance of stored text is not known
        self._stream: MarkdownStream | None = None

    def compose(self) -> ComposeResult:
        yield Static(self._role_line(), classes="role", markup=False)
        if self.role == "assistant":
            yield Markdown(visible(self.spans.text))
            yield Static(self.spans.render(), classes="provenance")
        else:
            yield Static(Text(visible(self.spans.text)), classes="body")

    @property
    def text(self) -> str:
        return self.spans.text

    def _role_line(self) -> str:
        name = {"user": "you", "assistant": "assistant", "system": "system prompt"}.get(self.role, self.role)
        return name if self.status in ("done", "streaming") else f"{name} · {self.status}"

    def start_stream(self) -> None:
        self.status = "streaming"
        self._stream = Markdown.get_stream(self.query_one(Markdown))

    async def append(self, chunk: TextChunk) -> None:
        self.spans.add(chunk.text, chunk.provenance)
        if self._stream is not None:
            await self._stream.write(visible(chunk.text))
        if self._provenance_shown():
            self.refresh_provenance()

    async def finish(self, status: str) -> None:
        """Ends the stream; ``status`` (done, cancelled, error: ...) shows next to the role when not done."""
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        self.status = status
        self.query_one(".role", Static).update(self._role_line())
        self.refresh_provenance()

    def refresh_provenance(self) -> None:
        if self.role == "assistant":
            self.query_one(".provenance", Static).update(self.spans.render())

    def _provenance_shown(self) -> bool:
        return any(node.has_class("-provenance") for node in self.ancestors_with_self)
