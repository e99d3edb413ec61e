"""What the tests of files in the conversation share: a small project, and an answer stored as
``Conversation.send`` stores one (the question with the hashes of the files it was sent with, then the
answer), so that a test names its answer's text exactly whatever the tiny model would write."""

from __future__ import annotations

from pathlib import Path

from ds4spec.faces.shared.conversation import Conversation

GREET = 'import sys\n\n\ndef hello(name):\n    return "hi " + name\n\n\nprint(hello(sys.argv[1]))\n'
RENAMED = GREET.replace("hello", "greet")
UTIL = "def twice(x):\n    return 2 * x\n\n\ndef thrice(x):\n    return 3 * x\n"


def make_project(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "greet.py").write_text(GREET)
    (root / "util.py").write_text(UTIL)
    return root


def store_answer(conv: Conversation, text: str, question: str = "Rename hello to greet.") -> None:
    """The last answer is ``text``, written while the conversation's files were as they are now."""
    conv.store.add_message(conv.session_id, "user", question, files=conv.files.sent([]).as_json())
    conv.store.add_message(conv.session_id, "assistant", text)
