"""``ds4spec chat``: the full-screen chat, ``--sessions`` to list stored sessions, ``--resume [ID]`` to reopen one."""

from __future__ import annotations

import argparse
import os
import sys

from ds4spec.engine.loading import check_settings
from ds4spec.engine.options import settings_from_args
from ds4spec.errors import UsageError
from ds4spec.faces.shared.session_options import (
    add_chat_options,
    print_sessions,
    session_store,
    session_to_resume,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "chat",
        help="chat with the target in a full-screen terminal interface",
        description="A chat in the terminal: answers stream as markdown, the status bar shows how speculation "
        "pays, and every session is kept on disk as it happens. Enter sends, Ctrl-J adds a line, Esc or Ctrl-C "
        "cancels an answer, Ctrl-T shows provenance, Ctrl-O lists sessions, Ctrl-Q quits; /help lists commands.",
    )
    add_chat_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    check_settings(settings)
    with session_store() as store:
        if args.sessions:
            print_sessions(store)
            return 0
        session_id = session_to_resume(store, args.resume, "chat")
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise UsageError("chat needs a terminal; in scripts use `ds4spec complete`")
        from ds4spec.faces.chat.app import ChatApp  # Textual is imported only when the interface really starts

        app = ChatApp(settings, store, session_id)
        try:
            app.run()
        finally:
            if app.conversation.engine is not None:
                app.conversation.engine.close()
    if app.loading:
        # The loading thread is inside llama.cpp, which cannot be interrupted: waiting for it kept the process
        # (the terminal given back, no prompt) for as long as the load took. The session is closed and saved.
        sys.stdout.flush()
        print("ds4spec: stopped while the models were loading", file=sys.stderr, flush=True)
        os._exit(0)
    return 0
