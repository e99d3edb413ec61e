"""The chat's dialogs: the session list (Ctrl-O; Enter reopens one, Esc goes back) and the confirmation of a
change to a file (``/apply``)."""

from __future__ import annotations

from typing import ClassVar

from rich.syntax import Syntax
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, OptionList, Static
from textual.widgets.option_list import Option

from ds4spec.faces.shared.session_options import session_line
from ds4spec.faces.shared.sessions import SessionInfo
from ds4spec.faces.shared.visible import visible


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


class ConfirmScreen(ModalScreen[bool]):
    """A change shown as a coloured diff, with the question: y (or the button) makes it, n or Esc does not."""

    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical {
        width: 90%; max-width: 120; height: 80%;
        border: round $warning; background: $surface; padding: 0 1;
    }
    ConfirmScreen VerticalScroll { height: 1fr; }
    ConfirmScreen Horizontal { height: auto; align: right middle; }
    ConfirmScreen Button { margin-left: 2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Write"),
        Binding("n", "answer(False)", "Cancel"),
        Binding("escape", "answer(False)", "Cancel"),
    ]

    def __init__(self, question: str, diff: str) -> None:
        super().__init__()
        self.question = question
        self.diff = diff

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question, classes="title", markup=False)
            with VerticalScroll():
                yield Static(Syntax(visible(self.diff), "diff", theme="ansi_dark", word_wrap=True), id="diff")
            with Horizontal():
                yield Button("Write (y)", id="yes", variant="warning")
                yield Button("Cancel (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()  # Enter on the dialog must not write by accident

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
