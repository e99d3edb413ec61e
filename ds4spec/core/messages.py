"""A chat message: what a conversation, a chat prompt and a chat drafter share."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: str  # system, user or assistant
    content: str
