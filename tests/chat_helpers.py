"""What the chat tests share: settings for tiny real models, a session file, and waiting on the live app."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.pilot import Pilot

from ds4spec.engine.settings import Settings
from ds4spec.faces.chat.app import ChatApp
from ds4spec.faces.chat.widgets import MessageView, NoteView
from ds4spec.faces.shared.sessions import SessionStore

SIZE = (100, 32)


def tiny_settings(model: Path, **overrides: object) -> Settings:
    """The tiny model as target; the lookup drafter speculates from the first token."""
    values: dict[str, object] = {"target": str(model), "draft": "lookup", "warmup": 0, "max_tokens": 24}
    return Settings(**{**values, **overrides})  # type: ignore[arg-type]


def make_app(model: Path, store_path: Path, session_id: int | None = None, **overrides: object) -> ChatApp:
    return ChatApp(tiny_settings(model, **overrides), SessionStore(store_path), session_id)


def drive(app: ChatApp, scenario: Callable[[Pilot], Awaitable[None]], size: tuple[int, int] = SIZE) -> None:
    """Runs ``app`` headless at ``size`` and plays ``scenario`` on it (no async test plugin needed)."""

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await scenario(pilot)

    asyncio.run(main())


async def until(pilot: Pilot, condition: Callable[[], bool], timeout: float = 20.0, what: str = "") -> None:
    """Lets the app run until ``condition`` holds; fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        await pilot.pause(0.02)
    await asyncio.sleep(0)


async def ready(pilot: Pilot) -> None:
    app = pilot.app
    assert isinstance(app, ChatApp)
    await until(pilot, lambda: app.conversation.engine is not None or app.load_error is not None, what="loading")
    await pilot.pause()


async def send(pilot: Pilot, text: str) -> None:
    """Types ``text`` into the input (as a paste would put it) and presses Enter."""
    app = pilot.app
    assert isinstance(app, ChatApp)
    box = app.query_one("#input")
    box.text = text  # type: ignore[attr-defined]
    await press_enter(pilot)


async def press_enter(pilot: Pilot) -> None:
    """Presses Enter and waits until the app has taken what the input held."""
    app = pilot.app
    assert isinstance(app, ChatApp)
    before = app.submissions
    await pilot.press("enter")
    await until(pilot, lambda: app.submissions > before, what="the app to take the message")


async def answered(pilot: Pilot) -> None:
    app = pilot.app
    assert isinstance(app, ChatApp)
    await pilot.pause()
    await until(pilot, lambda: not app.busy, what="the answer or command to finish")
    await pilot.pause()


def views(app: ChatApp, role: str | None = None) -> list[MessageView]:
    return [v for v in app.query(MessageView) if role is None or v.role == role]


def notes(app: ChatApp) -> list[str]:
    return [str(n.render()) for n in app.query(NoteView)]


def status_line(app: ChatApp) -> str:
    return str(app.status_bar.render())
