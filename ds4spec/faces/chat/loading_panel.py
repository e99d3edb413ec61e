"""Getting the models ready, and the panel above the input meanwhile: the step, a progress bar for downloads, or the
error. The loading runs on a thread of the panel's own, which tells the app how it ended by messages."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Label, ProgressBar

from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings
from ds4spec.errors import Ds4Error
from ds4spec.store.progress import ProgressListener

MIB = float(1 << 20)
# (settings, progress listener, stage, note) -> Engine; see ds4spec.faces.chat.loader.prepare_engine.
Loader = Callable[[Settings, ProgressListener, Callable[[str], None], Callable[[str], None]], Engine]


def default_loader(settings: Settings, listener: ProgressListener, stage: Callable[[str], None],
                   note: Callable[[str], None]) -> Engine:
    from ds4spec.faces.chat.loader import prepare_engine

    return prepare_engine(settings, listener=listener, stage=stage, note=note)


class LoadingPanel(Vertical):
    DEFAULT_CSS = """
    LoadingPanel { height: auto; padding: 0 1; }
    LoadingPanel.-done { display: none; }
    LoadingPanel .-failed { color: $error; }
    """

    class Loaded(Message):
        def __init__(self, engine: Engine) -> None:
            super().__init__()
            self.engine = engine

    class Failed(Message):
        def __init__(self, why: str) -> None:
            super().__init__()
            self.why = why

    class Note(Message):
        """What the user should know: from loading, or later from the engine (a drafter that cannot pay)."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._shown_progress: tuple[str, int] | None = None

    def compose(self) -> ComposeResult:
        yield Label("", id="loading-label", markup=False)
        yield ProgressBar(id="loading-bar", show_eta=False)

    def load(self, loader: Loader, settings: Settings) -> None:
        """Starts loading on a thread of its own; ``Loaded`` or ``Failed`` says how it ended. Not a Textual thread
        worker: those run in asyncio's default executor, which the app's exit waits for, and llama.cpp's load cannot
        be interrupted (Ctrl-Q while loading gave the terminal back and kept the process until the load ended)."""
        self.stage("loading the models")
        threading.Thread(target=self._load, args=(self.app, loader, settings), name="ds4spec-load", daemon=True).start()

    def _load(self, app: App[Any], loader: Loader, settings: Settings) -> None:
        def on_ui(callback: Callable[..., Any], *args: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the app has stopped: nobody is left to see it
                app.call_from_thread(callback, *args)

        def progress(label: str, done: int, total: int) -> None:
            step = (label, done * 100 // max(total, 1))  # only whole-percent steps cross threads
            if step != self._shown_progress:
                self._shown_progress = step
                on_ui(self.progress, label, done, total)

        try:
            engine = loader(settings, progress, lambda text: on_ui(self.stage, text),
                            lambda text: self.post_message(self.Note(text)))
        except Ds4Error as exc:
            self.post_message(self.Failed(str(exc)))
            return
        except Exception as exc:  # llama.cpp and friends: the message still belongs on screen, not a traceback
            self.post_message(self.Failed(f"{type(exc).__name__}: {exc}"))
            return
        if not self.post_message(self.Loaded(engine)):
            engine.close()  # the app has stopped

    def stage(self, text: str) -> None:
        """A step without a known length (loading): the bar pulses."""
        self._shown_progress = None
        self.query_one(Label).update(text + "…")
        self.query_one(ProgressBar).update(total=None, progress=0)

    def progress(self, label: str, done: int, total: int) -> None:
        self.query_one(Label).update(f"{label}: {done / MIB:.1f} of {total / MIB:.1f} MiB")
        self.query_one(ProgressBar).update(total=total, progress=done)

    def failed(self, message: str) -> None:
        label = self.query_one(Label)
        label.update(f"could not load the models: {message}")
        label.add_class("-failed")
        self.query_one(ProgressBar).display = False

    def done(self) -> None:
        self.add_class("-done")
