"""The chat application: the conversation on screen, models loading and answers generating in worker threads.

Threads: loading (pull + ``Engine.load``), generating and slash commands (``/draft`` loads a model) run in
Textual thread workers, one at a time besides loading; they touch widgets only through ``call_from_thread``
(``_ui``). The session store is written by the ``Conversation`` as each chunk arrives, before it is shown.
Keys: Enter sends, Ctrl-J adds a line, Esc or Ctrl-C cancels an answer (keeping what was written), Ctrl-T
toggles the provenance view, Ctrl-O lists sessions, Ctrl-Q quits.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, ClassVar

from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Footer, Static

from ds4spec.core.events import CycleReport, Finished, FinishReason, TextChunk
from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings
from ds4spec.errors import Ds4Error, InputError
from ds4spec.faces.chat.loading_panel import Loader, LoadingPanel, default_loader
from ds4spec.faces.chat.provenance import legend
from ds4spec.faces.chat.screens import ConfirmScreen, SessionsScreen
from ds4spec.faces.chat.status import StatusBar, StatusState
from ds4spec.faces.chat.widgets import ChatInput, MessageView, NoteView
from ds4spec.faces.shared.command_result import Confirmation
from ds4spec.faces.shared.conversation import Conversation
from ds4spec.faces.shared.sessions import SessionStore

MIN_WIDTH, MIN_HEIGHT = 40, 10


class _AppGone(Exception):
    """The app stopped while a worker still had something to show."""



class ChatApp(App[None]):
    TITLE = "ds4spec chat"
    ENABLE_COMMAND_PALETTE = False  # Ctrl-P would offer Textual's themes and screens, not ds4spec's commands
    CSS = """
    #main { height: 1fr; }
    #conversation { height: 1fr; padding: 0 1; }
    #legend { display: none; color: $text-muted; padding: 0 1; }
    #conversation.-provenance #legend { display: block; }
    #conversation.-provenance MessageView.-assistant Markdown { display: none; }
    #conversation.-provenance MessageView.-assistant .provenance { display: block; }
    #too-small { display: none; width: 1fr; height: 1fr; content-align: center middle; text-align: center; }
    Screen.-too-small #main { display: none; }
    Screen.-too-small #too-small { display: block; }
    """
    # Ctrl-C is the habit for "stop"; it must never quit while an answer streams, so Ctrl-Q alone quits.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("ctrl+c", "interrupt", "Cancel", show=False, priority=True),
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+t", "toggle_provenance", "Provenance"),
        Binding("ctrl+o", "sessions", "Sessions"),
    ]

    def __init__(self, settings: Settings, store: SessionStore, session_id: int | None = None, *,
                 engine: Engine | None = None, loader: Loader | None = None) -> None:
        super().__init__()
        self.settings = settings
        self.store = store
        self.conversation = Conversation(engine, store, session_id)
        self.status_state = StatusState()
        self._loader = loader or default_loader
        self._cancel = threading.Event()
        self.busy = False  # an answer or a command is running: one at a time
        self.submissions = 0  # Enter presses handled so far: what a test waits on before looking
        self.load_error: str | None = None

    # -- layout ------------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Vertical(id="main"):
            with VerticalScroll(id="conversation"):
                yield Static(legend(), id="legend")
            yield LoadingPanel(id="loading")
            yield ChatInput(id="input")
            yield StatusBar(self.status_state, id="status")
            yield Footer()
        yield Static(f"The terminal is too small for the chat.\nMake it at least {MIN_WIDTH}x{MIN_HEIGHT}.",
                     id="too-small")

    async def on_mount(self) -> None:
        self.query_one("#conversation", VerticalScroll).anchor()
        await self.show_history()
        if self.store.problem:
            await self.note(self.store.problem, error=True)
            self.notify(self.store.problem, severity="warning", timeout=10)
        self.query_one(ChatInput).focus()
        if self.conversation.engine is None:
            self.start_loading()
        else:
            self._engine_ready(self.conversation.engine)

    def on_resize(self, event: events.Resize) -> None:
        small = event.size.width < MIN_WIDTH or event.size.height < MIN_HEIGHT
        self.screen.set_class(small, "-too-small")

    async def show_history(self) -> None:
        """Redraws the conversation from the store (after a resume, /clear, /new or a session switch)."""
        view = self.query_one("#conversation", VerticalScroll)
        await view.remove_children(MessageView)
        await view.remove_children(NoteView)
        await view.mount_all(MessageView(m.role, m.content, m.status) for m in self.conversation.history())
        await self._show_system()
        await self._file_notes()
        self.status_state.stats = self.conversation.last_stats
        self.status_state.event = ""
        self.status_bar.show()

    async def _show_system(self) -> None:
        """The system prompt, when there is one, heads the conversation; /system changes it in place."""
        shown = [v for v in self.query(MessageView) if v.role == "system"]
        system = self.conversation.system
        if shown and shown[0].text == system:
            return
        for view in shown:
            await view.remove()
        if system:
            await self.query_one("#conversation", VerticalScroll).mount(MessageView("system", system), after="#legend")

    async def note(self, text: str, *, error: bool = False) -> None:
        await self.query_one("#conversation", VerticalScroll).mount(NoteView(text, error=error))

    async def _file_notes(self, before: MessageView | None = None) -> None:
        """What happened to the files in the conversation (re-read, gone), as notes in the conversation."""
        for text in self.conversation.take_notes():
            await self.query_one("#conversation", VerticalScroll).mount(NoteView(text), before=before)

    @property
    def status_bar(self) -> StatusBar:
        return self.query_one(StatusBar)

    def _ui(self, callback: Callable[..., Any], *args: Any) -> Any:
        """Runs ``callback`` on the UI thread from a worker; raises _AppGone once the app has stopped."""
        if not self.is_running:
            raise _AppGone
        try:
            return self.call_from_thread(callback, *args)
        except RuntimeError as exc:
            raise _AppGone from exc

    # -- loading -----------------------------------------------------------------------------------------

    @property
    def loading(self) -> bool:
        """The models are loading: neither loaded nor failed."""
        return self.conversation.engine is None and self.load_error is None

    def start_loading(self) -> None:
        self._set_phase("loading")
        self.query_one(LoadingPanel).load(self._loader, self.settings)

    async def on_loading_panel_note(self, message: LoadingPanel.Note) -> None:
        await self.note(message.text)

    def on_loading_panel_failed(self, message: LoadingPanel.Failed) -> None:
        self.load_error = message.why
        self.query_one(LoadingPanel).failed(message.why)
        self._set_phase("error")
        self.notify(message.why, title="could not load the models", severity="error", timeout=15)

    def on_loading_panel_loaded(self, message: LoadingPanel.Loaded) -> None:
        self._engine_ready(message.engine)

    def _engine_ready(self, engine: Engine) -> None:
        self.conversation.engine = engine
        self.query_one(LoadingPanel).done()
        self._show_models()
        self._set_phase("ready")

    def _show_models(self) -> None:
        engine = self.conversation.engine
        if engine is not None:
            self.status_state.target = engine.target_name
            self.status_state.drafter = engine.drafter_name
            self.status_state.speculating = engine.speculating
        self.status_bar.show()

    def _set_phase(self, phase: str) -> None:
        self.status_state.phase = phase
        self.status_bar.show()

    # -- sending -----------------------------------------------------------------------------------------

    async def on_chat_input_submitted(self, message: ChatInput.Submitted) -> None:
        self.submissions += 1
        text = message.text
        if not text.strip():
            self.notify("Type a message first (Ctrl-J starts a new line).", severity="warning")
            return
        if self.busy:
            self.notify("Wait for the answer, or cancel it with Esc.", severity="warning")
            return
        from ds4spec.faces.shared.slash import is_command

        if is_command(text):
            self.busy = True
            self.query_one(ChatInput).clear()
            self._command(text)
            return
        if self.conversation.engine is None:
            why = f"the models did not load: {self.load_error}" if self.load_error else "the models are still loading"
            self.notify(why, severity="warning")
            return
        self.busy = True
        self._cancel.clear()
        self.query_one(ChatInput).clear()
        conv_view = self.query_one("#conversation", VerticalScroll)
        user = MessageView("user", text)
        answer = MessageView("assistant", status="streaming")
        await conv_view.mount_all([user, answer])
        answer.start_stream()
        conv_view.scroll_end(animate=False)
        self.status_state.start_answer()
        self._set_phase("generating")
        self._generate(text, user, answer)

    @work(thread=True, group="generate", exit_on_error=False)
    def _generate(self, text: str, user: MessageView, answer: MessageView) -> None:
        try:
            events = self.conversation.send(text, cancelled=self._cancel.is_set)
        except InputError as exc:
            self._ui(self._refused, text, user, answer, str(exc))
            self._ui(self._file_notes)
            return
        self._ui(self._file_notes, user)
        try:
            for event in events:
                if isinstance(event, TextChunk):
                    self._ui(answer.append, event)
                elif isinstance(event, CycleReport):
                    self._ui(self._cycle, event)
                elif isinstance(event, Finished):
                    self._ui(self._finished, answer, event)
        except _AppGone:
            self._cancel.set()
            events.close()  # type: ignore[attr-defined]  # stores the answer as cancelled
        except Exception as exc:
            events.close()  # type: ignore[attr-defined]
            self._ui(self._failed, answer, f"{type(exc).__name__}: {exc}" if not isinstance(exc, Ds4Error)
                     else str(exc))

    async def _refused(self, text: str, user: MessageView, answer: MessageView, why: str) -> None:
        """Nothing was stored: take the two views away and give the text back to the input."""
        await user.remove()
        await answer.remove()
        box = self.query_one(ChatInput)
        if not box.text:
            box.text = text
            box.move_cursor(box.document.end)
        self.busy = False
        self._set_phase("ready")
        self.notify(why, title="not sent", severity="error", timeout=10)

    def _cycle(self, report: CycleReport) -> None:
        self.status_state.cycle(report)
        self.status_bar.show()

    async def _finished(self, answer: MessageView, event: Finished) -> None:
        cancelled = event.reason is FinishReason.CANCELLED
        await answer.finish("cancelled" if cancelled else "done")
        self.status_state.stats = event.stats
        self.busy = False
        self._set_phase("cancelled" if cancelled else "ready")

    async def _failed(self, answer: MessageView, why: str) -> None:
        await answer.finish("error")
        await self.note(why, error=True)
        self.busy = False
        self._set_phase("error")

    # -- commands ----------------------------------------------------------------------------------------

    @work(thread=True, group="command", exit_on_error=False)
    def _command(self, line: str) -> None:
        from ds4spec.faces.shared.slash import run_command

        try:
            result = run_command(line, self.conversation)
        except Ds4Error as exc:
            self._ui(self._command_done, None, str(exc))
            return
        except Exception as exc:
            self._ui(self._command_done, None, f"{type(exc).__name__}: {exc}")
            return
        self._ui(self._command_done, result, None)

    async def _command_done(self, result: Any, error: str | None) -> None:
        self.busy = False
        if error is not None:
            await self.note(error, error=True)
            return
        if result.cleared:
            await self.show_history()
        await self._show_system()
        if result.clipboard is not None:
            self.copy_to_clipboard(result.clipboard)
        if result.message:
            await self.note(result.message)
        self._show_models()
        if result.confirm is not None:
            confirm: Confirmation = result.confirm
            self.push_screen(ConfirmScreen(confirm.question, confirm.diff),
                             lambda yes: self._confirmed(confirm, bool(yes)))

    async def _confirmed(self, confirm: Confirmation, yes: bool) -> None:
        if not yes:
            await self.note("nothing was written")
            return
        try:
            await self.note(confirm.accept())
        except Ds4Error as exc:
            await self.note(str(exc), error=True)

    # -- keys --------------------------------------------------------------------------------------------

    def action_cancel(self) -> None:
        if self.status_state.phase == "generating":
            self._cancel.set()
            self._set_phase("cancelling")

    def action_interrupt(self) -> None:
        """Ctrl-C: cancels an answer; otherwise copies a selection in the input, or says how to quit."""
        if self.status_state.phase == "generating":
            self.action_cancel()
            return
        box = self.query_one(ChatInput)
        if self.focused is box and box.selected_text:
            box.action_copy()
            return
        self.notify("Ctrl-Q quits; Ctrl-C cancels an answer while it is written.")

    def action_toggle_provenance(self) -> None:
        view = self.query_one("#conversation", VerticalScroll)
        view.toggle_class("-provenance")
        if view.has_class("-provenance"):
            for message in view.query(MessageView):
                message.refresh_provenance()

    @property
    def provenance_shown(self) -> bool:
        return self.query_one("#conversation").has_class("-provenance")

    def action_sessions(self) -> None:
        if self.busy:
            self.notify("Wait for the answer, or cancel it with Esc.", severity="warning")
            return
        self.push_screen(SessionsScreen(self.store.sessions(), self.conversation.session_id), self._open_session)

    async def _open_session(self, session_id: int | None) -> None:
        if session_id is None or session_id == self.conversation.session_id:
            return
        engine = self.conversation.engine
        self.conversation = Conversation(engine, self.store, session_id)
        await self.show_history()
        await self.note(f"reopened session {session_id}")

    async def action_quit(self) -> None:
        # A generation still running would write to widgets that are gone and hold llama.cpp: stop it first.
        self._cancel.set()
        for worker in self.workers:
            if worker.group in ("generate", "command") and not worker.is_finished:
                with contextlib.suppress(Exception):  # its failure was shown already; quitting goes on
                    await worker.wait()
        self.exit()
