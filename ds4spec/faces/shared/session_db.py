"""The sessions file's tables, and how it is opened: what the session store and its salvage share.

Version 2 added the files in the conversation: ``messages.files`` (what a user message was sent with, as
JSON), ``session_files`` (the files added to a session) and ``applied`` (changes written by ``/apply``, kept
for ``/undo``). A version 1 file is migrated in place when it is opened; its sessions are untouched.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL DEFAULT '',
    system TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    status TEXT NOT NULL,
    stats TEXT,
    created REAL NOT NULL,
    files TEXT
);
CREATE INDEX IF NOT EXISTS messages_by_session ON messages(session_id, id);
CREATE TABLE IF NOT EXISTS session_files (
    session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    added REAL NOT NULL,
    PRIMARY KEY (session_id, path)
);
CREATE TABLE IF NOT EXISTS applied (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    before TEXT NOT NULL,
    after_sha256 TEXT NOT NULL,
    created REAL NOT NULL,
    undone INTEGER NOT NULL DEFAULT 0
);
"""


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=5.0)
    try:
        conn.execute("PRAGMA journal_mode=WAL")  # the first read of the file: a damaged one fails here
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
    except BaseException:
        conn.close()
        raise
    return conn


def create_schema(conn: sqlite3.Connection) -> None:
    """Creates the tables, or brings an older file up to this version."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(messages)")}
    if columns and "files" not in columns:  # version 1: CREATE TABLE IF NOT EXISTS keeps its old messages table
        conn.execute("ALTER TABLE messages ADD COLUMN files TEXT")
    conn.executescript(_SCHEMA)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
