"""SVG snapshots of the chat's main screens (pytest-textual-snapshot; `--snapshot-update` rewrites them).

Each screen is made deterministic: a fixed terminal size, no blinking cursor, conversations read from a
session file written here rather than generated, and a status bar fed fixed statistics instead of timings.
The SVGs live in tests/__snapshots__/test_chat_snapshots/.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_helpers import SIZE, ready, tiny_settings
from textual.pilot import Pilot

from ds4spec.core.events import Provenance, TextChunk
from ds4spec.core.stats import GenerationStats
from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings
from ds4spec.errors import ModelError
from ds4spec.faces.chat.app import ChatApp
from ds4spec.faces.chat.screens import ConfirmScreen, SessionsScreen
from ds4spec.faces.chat.widgets import ChatInput, MessageView
from ds4spec.faces.shared.sessions import SessionInfo, SessionStore

Compare = Callable[..., bool]

QUESTION = "How do I reverse a list in Python?"
ANSWER = """Use **slicing** or `reversed()`:

```python
items = [1, 2, 3]
backwards = items[::-1]
```

- `items[::-1]` makes a new list
- `items.reverse()` reverses in place
"""
# What a real run of the default pair reports (fixed here so that the snapshot has no timings in it).
FIXED_STATS = GenerationStats(prompt_tokens=42, committed_tokens=120, target_forward_passes=50,
                              drafted_tokens=100, accepted_tokens=70, verify_passes_with_draft=40,
                              generation_seconds=4.0, plain_step_seconds=0.05)


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Session times are shown in local time: pin it so that the snapshot is the same everywhere."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def conversation_file(path: Path) -> int:
    store = SessionStore(path)
    sid = store.new_session()
    store.add_message(sid, "user", QUESTION)
    store.add_message(sid, "assistant", ANSWER)
    store.close()
    return sid


async def settle(pilot: Pilot) -> None:
    """Waits for the models, stops the cursor blinking, and fixes the numbers in the status bar."""
    await ready(pilot)
    app = pilot.app
    assert isinstance(app, ChatApp)
    app.query_one(ChatInput).cursor_blink = False
    app.status_state.stats = FIXED_STATS
    app.status_state.event = "python.block-open"
    app.status_bar.show()
    await pilot.pause()


def test_main_screen_with_a_markdown_answer(snap_compare: Compare, tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    """A resumed conversation: markdown with a highlighted code block, the status bar, the footer's keys."""
    sid = conversation_file(tmp_path / "sessions.sqlite3")
    app = ChatApp(tiny_settings(tiny_bpe_gguf), SessionStore(tmp_path / "sessions.sqlite3"), sid)
    assert snap_compare(app, terminal_size=SIZE, run_before=settle)


def test_provenance_view(snap_compare: Compare, tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    """Ctrl-T: text accepted from drafts in green, the target's own tokens in cyan, reopened text plain."""
    sid = conversation_file(tmp_path / "sessions.sqlite3")
    app = ChatApp(tiny_settings(tiny_bpe_gguf), SessionStore(tmp_path / "sessions.sqlite3"), sid)

    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        view = MessageView("assistant", status="streaming")
        await app.query_one("#conversation").mount(view)
        view.start_stream()
        for text, who in [("def ", Provenance.TARGET), ("reverse(items):\n    return ", Provenance.DRAFT),
                          ("items", Provenance.TARGET), ("[::-1]\n", Provenance.DRAFT)]:
            await view.append(TextChunk(text, who))
        await view.finish("done")
        await pilot.press("ctrl+t")

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_session_list(snap_compare: Compare, tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    """Ctrl-O: the stored sessions, newest first, the open one marked."""
    app = ChatApp(tiny_settings(tiny_bpe_gguf), SessionStore(tmp_path / "sessions.sqlite3"))
    day = 1_795_000_000.0  # fixed times: the list shows dates
    sessions = [SessionInfo(3, QUESTION, day, day + 3600, 4), SessionInfo(2, "Explain this regex", day, day, 1),
                SessionInfo(1, "", day - 86400, day - 86400, 2)]

    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        await app.push_screen(SessionsScreen(sessions, current=3))

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_apply_confirmation(snap_compare: Compare, tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    """/apply: the change as a coloured diff, the question, and Cancel focused so that Enter writes nothing."""
    app = ChatApp(tiny_settings(tiny_bpe_gguf), SessionStore(tmp_path / "sessions.sqlite3"))
    before = 'def hello(name):\n    return "hi " + name\n\n\nprint(hello("you"))\n'
    diff = "".join(difflib.unified_diff(before.splitlines(keepends=True),
                                        before.replace("hello", "greet").splitlines(keepends=True),
                                        "a/greet.py", "b/greet.py"))

    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        await app.push_screen(ConfirmScreen("Write this change to greet.py?", diff))

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_terminal_too_small(snap_compare: Compare, tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    app = ChatApp(tiny_settings(tiny_bpe_gguf), SessionStore(tmp_path / "sessions.sqlite3"))
    assert snap_compare(app, terminal_size=(36, 8), run_before=settle)


def test_a_model_that_fails_to_load(snap_compare: Compare, tmp_path: Path) -> None:
    """The error in the loading panel and a notification; the input still takes commands."""
    settings = tiny_settings(Path("/nonexistent/model.gguf"))
    app = ChatApp(settings, SessionStore(tmp_path / "sessions.sqlite3"))

    async def run_before(pilot: Pilot) -> None:
        await ready(pilot)
        app.query_one(ChatInput).cursor_blink = False

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_first_run_download_progress(snap_compare: Compare, tmp_path: Path) -> None:
    """The loading panel midway through a first-run download; the byte counts are fed as a pull feeds them."""

    def held_loader(settings: Settings, listener: Any, stage: Any, note: Any) -> Engine:
        stage("downloading qwen2.5-coder-1.5b (first run)")
        listener("qwen2.5-coder-1.5b (huggingface)", 420 << 20, 1066 << 20)
        while app.is_running:  # held here until the screenshot is taken and the app closes
            time.sleep(0.02)
        raise ModelError("stopped by the test")

    app = ChatApp(tiny_settings(Path("unused.gguf")), SessionStore(tmp_path / "sessions.sqlite3"),
                  loader=held_loader)

    async def run_before(pilot: Pilot) -> None:
        app.query_one(ChatInput).cursor_blink = False
        deadline = time.monotonic() + 10
        while "MiB" not in str(app.query_one("#loading-label").render()) and time.monotonic() < deadline:
            await pilot.pause(0.02)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
