"""What ``ds4spec chat`` and ``ds4spec repl`` share on the command line: their options, the session store
they open, and the ``--sessions`` listing."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ds4spec.engine.options import add_model_options, add_sampling_options, add_speculation_options
from ds4spec.errors import InputError
from ds4spec.faces.shared.sessions import SessionInfo, SessionStore
from ds4spec.faces.shared.visible import visible


def add_chat_options(parser: argparse.ArgumentParser) -> None:
    add_model_options(parser)
    add_speculation_options(parser)
    add_sampling_options(parser)
    add_session_options(parser)


@contextmanager
def session_store() -> Iterator[SessionStore]:
    """The session store, closed on leaving; a damaged file (moved aside, ``store.problem``) is one warning."""
    store = SessionStore()
    try:
        if store.problem:
            print(f"ds4spec: warning: {store.problem}", file=sys.stderr)
        yield store
    finally:
        store.close()


def session_line(info: SessionInfo) -> str:
    """``#12  2026-11-21 11:20  How do I reverse a list?  (4 messages)``; the title cannot drive the terminal."""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.updated))
    noun = "message" if info.messages == 1 else "messages"
    return f"#{info.id:<4} {when}  {visible(info.title) or '(untitled)'}  ({info.messages} {noun})"


def print_sessions(store: SessionStore) -> None:
    """``--sessions``: newest first, or a line saying there are none."""
    sessions = store.sessions()
    if not sessions:
        print("no saved sessions")
    for info in sessions:
        print(session_line(info))


LATEST = 0  # ``--resume`` without an ID (session IDs start at 1)


def add_session_options(parser: argparse.ArgumentParser) -> None:
    """``--resume [ID]`` and ``--sessions``, shared by ``chat`` and ``repl``."""
    g = parser.add_argument_group("sessions")
    g.add_argument("--resume", nargs="?", const=LATEST, type=int, metavar="ID",
                   help="reopen session ID (without ID: the most recent one)")
    g.add_argument("--sessions", action="store_true", help="list the stored sessions, newest first, and exit")


def session_to_resume(store: SessionStore, resume: int | None, command: str) -> int | None:
    """The session to open: None for a new one, the latest for ``--resume`` alone, else the one named."""
    if resume is None:
        return None
    if resume == LATEST:
        latest = store.latest()
        if latest is None:
            raise InputError(f"there is no stored session to resume yet; start one with `ds4spec {command}`")
        return latest
    if not store.exists(resume):
        raise InputError(f"there is no session {resume}; `ds4spec {command} --sessions` lists them")
    return resume
