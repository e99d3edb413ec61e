"""The files in a conversation: added with ``/add`` (kept with the session), or attached to one message by an
``@path`` in it.

Added files are shown to the model in front of the newest message, as they are on disk when it is sent: a
file changed since it was read is read again first, and the user is told. An ``@path`` names a file for its
own message only; its text is stored with that message and stays part of it in later turns. A user message
is stored with the hashes of the added files it was sent with, which is how ``/apply`` knows whether a file
changed since the model saw it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ds4spec.errors import InputError
from ds4spec.faces.shared.files import FileSnapshot, absolute, read_file, sha256, shown_name, snapshot_of
from ds4spec.faces.shared.sessions import SessionStore

_MENTION = re.compile(r"(?<!\S)@(\S+)")
_TRAILING = ".,;:!?)]}'\""  # "look at @main.py." names main.py


@dataclass(frozen=True)
class SentFiles:
    """What a user message was sent with: the added files' hashes, and the text of those it attached."""

    seen: dict[str, str]  # absolute path -> sha256 of the version the model was shown
    attached: tuple[FileSnapshot, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"seen": self.seen,
                "attached": [{"path": str(f.path), "text": f.text, "sha256": f.sha256} for f in self.attached]}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> SentFiles:
        if not data:
            return cls({})
        attached = tuple(FileSnapshot(Path(a["path"]), a["text"], a["sha256"]) for a in data.get("attached", ()))
        return cls(dict(data.get("seen", {})), attached)

    def versions(self) -> dict[Path, str]:
        """Every file the answer to this message saw, with the hash of the version it saw."""
        return {**{Path(p): h for p, h in self.seen.items()}, **{f.path: f.sha256 for f in self.attached}}


def mentioned(text: str, skip: set[Path]) -> list[FileSnapshot]:
    """The files ``@path`` words in ``text`` name, when such a file exists (``@dataclass`` stays text), read
    now; one that exists but cannot be used (binary, not UTF-8) is an ``InputError``."""
    found: dict[Path, FileSnapshot] = {}
    for match in _MENTION.finditer(text):
        for candidate in dict.fromkeys((match[1], match[1].rstrip(_TRAILING))):
            path = absolute(candidate)
            if candidate and os.path.isfile(path):
                if path not in skip and path not in found:
                    try:
                        found[path] = read_file(path)
                    except InputError as err:
                        raise InputError(f"@{candidate}: {err}") from None
                break
    return list(found.values())


class AddedFiles:
    """The files added to one session, as last read from disk."""

    def __init__(self, store: SessionStore, session_id: int) -> None:
        self.store = store
        self.session_id = session_id
        self.snapshots: dict[Path, FileSnapshot] = {}

    def reopen(self) -> list[str]:
        """Reads the files stored with the session; one that is gone or unreadable is dropped, with a note."""
        self.snapshots = {}
        for path in map(Path, self.store.files(self.session_id)):
            self.snapshots[path] = FileSnapshot(path, "", "")
        return self.refresh(reopening=True)

    def add(self, read: list[FileSnapshot]) -> None:
        self.store.add_files(self.session_id, [str(s.path) for s in read])
        for snapshot in read:
            self.snapshots[snapshot.path] = snapshot

    def drop(self, paths: list[Path]) -> list[Path]:
        unknown = [p for p in paths if p not in self.snapshots]
        if unknown:
            raise InputError(f"{shown_name(unknown[0])} is not in the conversation; /files lists what is")
        self.store.drop_files(self.session_id, [str(p) for p in paths])
        for path in paths:
            del self.snapshots[path]
        return paths

    def refresh(self, *, reopening: bool = False) -> list[str]:
        """Reads again every file that changed on disk; returns what the user should be told."""
        notes = []
        for path, old in list(self.snapshots.items()):
            try:
                data = path.read_bytes()
            except OSError:
                data = None
            if data is not None and sha256(data) == old.sha256:
                continue
            try:
                # Bytes already read are not read again; a path that could not be read gets read_file's reason.
                self.snapshots[path] = read_file(path) if data is None else snapshot_of(path, data)
            except InputError as err:
                self.drop([path])
                gone = "is gone" if data is None else f"can no longer be used ({err})"
                notes.append(f"{shown_name(path)} {gone}: dropped it from the conversation")
                continue
            if not reopening:
                notes.append(f"{shown_name(path)} changed on disk: the model sees it as it is now")
        return notes

    def sent(self, attached: list[FileSnapshot]) -> SentFiles:
        return SentFiles({str(p): s.sha256 for p, s in self.snapshots.items()}, tuple(attached))
