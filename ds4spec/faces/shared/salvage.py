"""Opening the sessions file, and what to do when it is damaged: keep what can be read, never refuse to start.

A file that SQLite cannot open, or whose quick check fails, is moved aside (with its ``-wal`` and ``-shm``
companions) to ``sessions.sqlite3.damaged-<time>``. Every session whose row and messages can still be read
from the moved file is copied, ids kept, into a fresh file; a session with any unreadable message is left
out whole rather than kept with holes. If not even a fresh file can be made, sessions live in memory for
this run. Each case is described by one line, the store's ``problem``.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from ds4spec.faces.shared.session_db import connect, create_schema

_Row = tuple[Any, ...]
SQLITE_MAGIC = b"SQLite format 3\x00"


def open_or_salvage(path: Path) -> tuple[sqlite3.Connection, str | None]:
    """The connection to use, and None or one line saying what was wrong with the file and what was done."""
    try:
        return _open_checked(path), None
    except sqlite3.DatabaseError as exc:
        reason = str(exc)
    try:
        aside = _move_aside(path)
    except OSError as exc:
        conn = _in_memory()
        return conn, f"{path} is damaged ({reason}) and could not be moved aside ({exc}); sessions are not kept"
    found, kept = _read_damaged(aside)
    try:
        conn = _open_checked(path)
    except (sqlite3.DatabaseError, OSError) as exc:
        conn = _in_memory()
        reason += f"; a fresh file could not be made either ({exc}), so sessions are not kept"
    _copy_into(conn, kept)
    if not found:
        outcome = "no session could be read from it"
    else:
        outcome = f"kept {len(kept)} of the {found} sessions found in it"
    return conn, f"{path} was damaged ({reason}); moved it aside to {aside}; {outcome}"


def _open_checked(path: Path) -> sqlite3.Connection:
    conn = connect(path)
    try:
        verdict = conn.execute("PRAGMA quick_check").fetchone()[0]
        if verdict != "ok":
            raise sqlite3.DatabaseError(f"quick check: {verdict}")
        create_schema(conn)
        conn.execute("SELECT COUNT(*) FROM sessions").fetchone()  # a foreign file with other tables fails here
        conn.execute("SELECT id, session_id, role, content, status, stats, created FROM messages LIMIT 1")
    except BaseException:
        conn.close()
        raise
    return conn


def _in_memory() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    create_schema(conn)
    return conn


def _move_aside(path: Path) -> Path:
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    n = 1
    while aside.exists():
        n += 1
        aside = aside.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}-{n}")
    path.replace(aside)
    for suffix in ("-wal", "-shm"):  # SQLite finds the WAL by name: it moves along with the file
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            companion.replace(aside.with_name(aside.name + suffix))
    return aside


def _read_damaged(path: Path) -> tuple[int, list[tuple[_Row, list[_Row], list[_Row]]]]:
    """How many session rows could be read, and those whose messages could all be read too."""
    with tempfile.TemporaryDirectory(prefix="ds4spec-salvage-") as tmp:
        copy = Path(tmp) / "copy.sqlite3"
        _readable_copy(path, copy)
        return _read_rows(sqlite3.connect(copy))  # a throw-away copy: opening it writable costs nothing


def _readable_copy(path: Path, copy: Path) -> None:
    """Copies the file so that SQLite will read what is left of it.

    A truncated file still declares its old page count in the header, and SQLite then refuses the whole
    file as malformed; the copy is cut to whole pages and declares the pages it really has, so that every
    table page still present can be read.
    """
    data = bytearray(path.read_bytes())
    if len(data) >= 100 and data.startswith(SQLITE_MAGIC):
        page_size = int.from_bytes(data[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size  # the header's encoding of 64 KiB
        if page_size >= 512:
            del data[len(data) // page_size * page_size:]
            data[28:32] = (len(data) // page_size).to_bytes(4, "big")
    copy.write_bytes(bytes(data))
    wal = path.with_name(path.name + "-wal")
    if wal.exists():  # committed transactions not yet checkpointed live only here
        shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))


def _read_rows(src: sqlite3.Connection) -> tuple[int, list[tuple[_Row, list[_Row], list[_Row]]]]:
    """Each readable session with its messages and its files in the conversation (``/undo``'s history is not
    kept: what it would restore may be gone from the damaged file)."""
    sessions: list[_Row] = []
    kept: list[tuple[_Row, list[_Row], list[_Row]]] = []
    try:
        with contextlib.suppress(sqlite3.DatabaseError):  # keep the rows read before the damage
            for row in src.execute("SELECT id, title, system, created, updated FROM sessions ORDER BY id"):
                sessions.append(row)
        files = "files" if _has_column(src, "messages", "files") else "NULL"  # a version 1 file has none
        for session in sessions:
            try:
                messages = src.execute(
                    f"SELECT id, session_id, role, content, status, stats, created, {files} FROM messages "
                    "WHERE session_id = ? ORDER BY id", (session[0],)).fetchall()
            except sqlite3.DatabaseError:
                continue
            added: list[_Row] = []
            with contextlib.suppress(sqlite3.DatabaseError):
                added = src.execute("SELECT session_id, path, added FROM session_files WHERE session_id = ?",
                                    (session[0],)).fetchall()
            kept.append((session, messages, added))
    finally:
        src.close()
    return len(sessions), kept


def _has_column(conn: sqlite3.Connection, table: str, column: str) -> bool:
    with contextlib.suppress(sqlite3.DatabaseError):
        return column in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    return False


def _copy_into(conn: sqlite3.Connection, kept: list[tuple[_Row, list[_Row], list[_Row]]]) -> None:
    conn.execute("BEGIN")
    for session, messages, added in kept:
        conn.execute("INSERT INTO sessions (id, title, system, created, updated) VALUES (?, ?, ?, ?, ?)", session)
        conn.executemany("INSERT INTO messages (id, session_id, role, content, status, stats, created, files) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", messages)
        conn.executemany("INSERT INTO session_files (session_id, path, added) VALUES (?, ?, ?)", added)
    conn.execute("COMMIT")
