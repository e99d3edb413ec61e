"""What a slash command gives back to the face that ran it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Confirmation:
    """A change the user must see and accept before it is made (``/apply``): the face shows ``diff``, asks
    ``question``, and calls ``accept`` only on a yes. ``accept`` returns what to show, or raises a one-line
    ``UsageError`` when the change can no longer be made."""

    question: str
    diff: str
    accept: Callable[[], str]


@dataclass(frozen=True)
class CommandResult:
    message: str  # what the face shows, possibly several lines
    clipboard: str | None = None  # text the face puts on the clipboard (OSC 52 in a terminal)
    cleared: bool = False  # the conversation was replaced or emptied: the face redraws it
    confirm: Confirmation | None = None  # asked after ``message`` is shown
