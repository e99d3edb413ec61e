"""What the engine itself writes: the expected texts that the HTTP server's answers are compared with."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ds4spec.backend.prompt import ChatMessage
from ds4spec.core.events import Event, TextChunk
from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings


@contextmanager
def plain_engine(target: Path) -> Iterator[Engine]:
    """Greedy plain decoding of ``target`` in this process, as a server started with ``--draft none`` decodes."""
    with Engine.load(Settings(target=str(target), draft="none", threads=1)) as engine:
        yield engine


def text_of(events: Iterable[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextChunk))


def chat_messages(messages: list[dict[str, str]]) -> list[ChatMessage]:
    return [ChatMessage(m["role"], m["content"]) for m in messages]


def chat_text(engine: Engine, messages: list[dict[str, str]], **kwargs: Any) -> str:
    return text_of(engine.chat(chat_messages(messages), **kwargs))
