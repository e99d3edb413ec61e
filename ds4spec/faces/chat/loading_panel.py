"""The panel above the input while the models get ready: the step, a progress bar for downloads, or the error."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label, ProgressBar

MIB = float(1 << 20)


class LoadingPanel(Vertical):
    DEFAULT_CSS = """
    LoadingPanel { height: auto; padding: 0 1; }
    LoadingPanel.-done { display: none; }
    LoadingPanel .-failed { color: $error; }
    """

    def compose(self) -> ComposeResult:
        yield Label("", id="loading-label", markup=False)
        yield ProgressBar(id="loading-bar", show_eta=False)

    def stage(self, text: str) -> None:
        """A step without a known length (loading): the bar pulses."""
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
