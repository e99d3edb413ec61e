"""The session list: pick a stored session to reopen it (Ctrl-O in the chat; Esc goes back)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from ds4spec.faces.shared.session_options import session_line
from ds4spec.faces.shared.sessions import SessionInfo


class SessionsScreen(ModalScreen[int | None]):
    """Dismissed with the chosen session's id, or None."""

    DEFAULT_CSS = """
    SessionsScreen { align: center middle; }
    SessionsScreen > Vertical {
        width: 90%; max-width: 100; height: 80%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    SessionsScreen OptionList { height: 1fr; border: none; }
    SessionsScreen .hint { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Back")]

    def __init__(self, sessions: list[SessionInfo], current: int | None = None) -> None:
        super().__init__()
        self.sessions = sessions
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Sessions (newest first)", classes="title")
            options = [Option(session_line(s) + ("  ← open" if s.id == self.current else ""), id=str(s.id))
                       for s in self.sessions]
            yield OptionList(*options, markup=False)  # a title is what the user typed, never markup
            yield Label("Enter reopens a session · Esc goes back" if options else "No stored sessions yet · Esc",
                        classes="hint")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(int(event.option.id or 0))

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
