"""A chat message: what a conversation, a chat prompt and a chat drafter share."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ds4spec.errors import ModelError


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: str  # system, user or assistant
    content: str


def split_rendered(messages: Sequence[ChatMessage], render: Callable[[list[dict[str, str]]], str]
                   ) -> tuple[list[tuple[str, str]], str]:
    """A conversation rendered by a chat template (``render``), split into what the template wrote and what the
    users wrote: (markup before each message's content, that content) pairs, then the markup after the last.

    The template renders unique sentinels in place of the contents, so that the markup may be tokenized with
    special tokens parsed while no content ever is: a message holding ``<|im_end|>`` stays text.
    """
    sentinels = {f"\x00ds4spec-{uuid.uuid4().hex}-{i}\x00": m.content for i, m in enumerate(messages)}
    rest = render([{"role": m.role, "content": s} for m, s in zip(messages, sentinels, strict=True)])
    pieces = []
    for sentinel, content in sentinels.items():
        before, found, rest = rest.partition(sentinel)
        if not found:
            raise ModelError("the chat template dropped or altered a message; it cannot be used safely")
        pieces.append((before, content))
    return pieces, rest
