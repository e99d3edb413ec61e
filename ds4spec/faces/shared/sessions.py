"""Chat sessions kept in SQLite as they happen, shared by ``ds4spec chat`` and ``ds4spec repl``.

The file is ``data_dir()/sessions.sqlite3`` in WAL mode. Every write is committed at once, and an answer is
committed chunk by chunk (``append``), so a killed process loses nothing that was on the screen. With
``synchronous=NORMAL`` a commit is a write into the WAL without an fsync: it survives the process being
killed (the OS holds the data), not a power cut, which is the trade that keeps per-chunk commits cheap.

A file that is not a database or fails SQLite's quick check is not fatal: what can be read of it is copied
into a fresh file (``ds4spec.faces.shared.salvage``), the damaged file is moved aside, and ``problem`` says so
in one line. One store may be used from several threads (the chat app writes from a worker thread); a lock
serialises the calls.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ds4spec.faces.shared.salvage import open_or_salvage
from ds4spec.paths import data_dir

STATUSES = ("done", "streaming", "cancelled", "error")
TITLE_CHARS = 60


@dataclass(frozen=True)
class StoredMessage:
    id: int
    role: str  # system, user or assistant
    content: str
    status: str  # done, streaming (being written, or the process died while writing), cancelled or error
    files: dict[str, Any] | None = None  # a user message: the files it was sent with (``conversation_files``)


@dataclass(frozen=True)
class SessionInfo:
    id: int
    title: str  # the first line of the first user message, shortened; "" until there is one
    created: float  # seconds since the epoch
    updated: float
    messages: int


@dataclass(frozen=True)
class AppliedChange:
    id: int
    path: str
    before: str  # the file's text before the change
    after_sha256: str  # the file's hash right after it: /undo restores only a file still in that state


def default_path() -> Path:
    return data_dir() / "sessions.sqlite3"


def _title(text: str) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first if len(first) <= TITLE_CHARS else first[: TITLE_CHARS - 1] + "…"


class SessionStore:
    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn, self.problem = open_or_salvage(self.path)

    # -- sessions ---------------------------------------------------------------------------------------

    def new_session(self, system: str | None = None) -> int:
        now = time.time()
        cur = self._write(("INSERT INTO sessions (system, created, updated) VALUES (?, ?, ?)", (system, now, now)))
        return int(cur.lastrowid or 0)

    def sessions(self) -> list[SessionInfo]:
        """Sessions with at least one message, most recently updated first (empty ones are never listed)."""
        rows = self._read(
            "SELECT s.id, s.title, s.created, s.updated, COUNT(m.id) FROM sessions s "
            "JOIN messages m ON m.session_id = s.id GROUP BY s.id ORDER BY s.updated DESC, s.id DESC"
        )
        return [SessionInfo(*row) for row in rows]

    def latest(self) -> int | None:
        listed = self.sessions()
        return listed[0].id if listed else None

    def exists(self, session_id: int) -> bool:
        return bool(self._read("SELECT 1 FROM sessions WHERE id = ?", (session_id,)))

    def system(self, session_id: int) -> str | None:
        rows = self._read("SELECT system FROM sessions WHERE id = ?", (session_id,))
        return rows[0][0] if rows else None

    def set_system(self, session_id: int, text: str | None) -> None:
        self._write(("UPDATE sessions SET system = ?, updated = ? WHERE id = ?",
                     (text or None, time.time(), session_id)))

    def clear(self, session_id: int) -> None:
        """Forgets the session's messages; the session and its system prompt stay."""
        self._write(
            ("DELETE FROM messages WHERE session_id = ?", (session_id,)),
            ("UPDATE sessions SET title = '', updated = ? WHERE id = ?", (time.time(), session_id)),
        )

    # -- messages ---------------------------------------------------------------------------------------

    def messages(self, session_id: int) -> list[StoredMessage]:
        rows = self._read("SELECT id, role, content, status, files FROM messages WHERE session_id = ? ORDER BY id",
                          (session_id,))
        return [StoredMessage(*row[:4], json.loads(row[4]) if row[4] else None) for row in rows]

    def add_message(self, session_id: int, role: str, content: str, status: str = "done",
                    files: dict[str, Any] | None = None) -> int:
        _check_status(status)
        now = time.time()
        cur = self._write(
            ("INSERT INTO messages (session_id, role, content, status, created, files) VALUES (?, ?, ?, ?, ?, ?)",
             (session_id, role, content, status, now, None if files is None else json.dumps(files))),
            ("UPDATE sessions SET title = ? WHERE id = ? AND title = '' AND ?",
             (_title(content), session_id, role == "user")),
            ("UPDATE sessions SET updated = ? WHERE id = ?", (now, session_id)),
        )
        return int(cur.lastrowid or 0)

    def append(self, message_id: int, text: str) -> None:
        """Adds ``text`` to a message and commits it before returning: a kill right after loses nothing."""
        self._write(("UPDATE messages SET content = content || ? WHERE id = ?", (text, message_id)))

    def set_status(self, message_id: int, status: str, stats: dict[str, Any] | None = None) -> None:
        _check_status(status)
        data = None if stats is None else json.dumps(stats)
        self._write(
            ("UPDATE messages SET status = ?, stats = COALESCE(?, stats) WHERE id = ?", (status, data, message_id)),
            ("UPDATE sessions SET updated = ? WHERE id = (SELECT session_id FROM messages WHERE id = ?)",
             (time.time(), message_id)),
        )

    def stats(self, session_id: int) -> list[dict[str, Any]]:
        """The statistics stored with the session's answers, oldest first (answers without any are skipped)."""
        rows = self._read("SELECT stats FROM messages WHERE session_id = ? AND stats IS NOT NULL ORDER BY id",
                          (session_id,))
        return [json.loads(row[0]) for row in rows]

    def settle(self, session_id: int) -> None:
        """Marks answers left ``streaming`` by a process that died as ``cancelled``: what was stored stays."""
        self._write(("UPDATE messages SET status = 'cancelled' WHERE session_id = ? AND status = 'streaming'",
                     (session_id,)))

    # -- files in the conversation ----------------------------------------------------------------------

    def files(self, session_id: int) -> list[str]:
        """The paths added to the session, in the order they were added."""
        rows = self._read("SELECT path FROM session_files WHERE session_id = ? ORDER BY added, path", (session_id,))
        return [row[0] for row in rows]

    def add_files(self, session_id: int, paths: list[str]) -> None:
        if not paths:
            return
        now = time.time()
        self._write(*[("INSERT OR IGNORE INTO session_files (session_id, path, added) VALUES (?, ?, ?)",
                       (session_id, path, now)) for path in paths])

    def drop_files(self, session_id: int, paths: list[str]) -> None:
        if not paths:
            return
        self._write(*[("DELETE FROM session_files WHERE session_id = ? AND path = ?", (session_id, path))
                      for path in paths])

    def record_apply(self, session_id: int, path: str, before: str, after_sha256: str) -> int:
        cur = self._write(("INSERT INTO applied (session_id, path, before, after_sha256, created) "
                           "VALUES (?, ?, ?, ?, ?)", (session_id, path, before, after_sha256, time.time())))
        return int(cur.lastrowid or 0)

    def last_apply(self, session_id: int, path: str | None = None) -> AppliedChange | None:
        """The most recent change written by ``/apply`` in the session (to ``path``) and not yet undone."""
        rows = self._read("SELECT id, path, before, after_sha256 FROM applied WHERE session_id = ? AND undone = 0 "
                          "AND (? IS NULL OR path = ?) ORDER BY id DESC LIMIT 1", (session_id, path, path))
        return AppliedChange(*rows[0]) if rows else None

    def mark_undone(self, apply_id: int) -> None:
        self._write(("UPDATE applied SET undone = 1 WHERE id = ?", (apply_id,)))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- plumbing ---------------------------------------------------------------------------------------

    def _write(self, *statements: tuple[str, tuple[Any, ...]]) -> sqlite3.Cursor:
        """Runs ``statements`` as one committed transaction; returns the first statement's cursor."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                cursors = [self._conn.execute(sql, params) for sql, params in statements]
                self._conn.execute("COMMIT")
            except BaseException:
                # A Ctrl-C can land just after BEGIN returns; a transaction left open fails every later write.
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
        return cursors[0]

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()


def _check_status(status: str) -> None:
    if status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
