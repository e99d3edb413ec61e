"""The session store: written as things happen, readable by another process at once, and never fatal when
the file is damaged (what can be read is kept, the rest is moved aside and named)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ds4spec.faces.shared.session_options import session_line
from ds4spec.faces.shared.sessions import SessionInfo, SessionStore, default_path


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    s = SessionStore(tmp_path / "sessions.sqlite3")
    yield s
    s.close()


def fill(store: SessionStore, sessions: int, body: str = "") -> list[int]:
    ids = []
    for i in range(sessions):
        sid = store.new_session()
        for j in range(4):
            store.add_message(sid, "user" if j % 2 == 0 else "assistant", f"session {i} message {j} {body}")
        ids.append(sid)
    return ids


def test_default_file_is_in_the_data_directory() -> None:
    store = SessionStore()
    try:
        assert store.path == default_path() == Path(os.environ["DS4SPEC_HOME"]) / "sessions.sqlite3"
        assert store.problem is None
    finally:
        store.close()


def test_appended_text_is_visible_to_another_reader_at_once(store: SessionStore) -> None:
    sid = store.new_session()
    mid = store.add_message(sid, "assistant", "", status="streaming")
    store.append(mid, "Hello")
    store.append(mid, ", world")
    other = SessionStore(store.path)
    try:
        assert other.messages(sid)[0].content == "Hello, world"
    finally:
        other.close()


def test_kill_mid_answer_keeps_what_was_streamed(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    writer = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from ds4spec.faces.shared.sessions import SessionStore\n"
        f"s = SessionStore(Path({str(path)!r}))\n"
        "sid = s.new_session()\n"
        "s.add_message(sid, 'user', 'count')\n"
        "m = s.add_message(sid, 'assistant', '', status='streaming')\n"
        "for i in range(3):\n"
        "    s.append(m, f'{i} ')\n"
        "print('shown', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", writer], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"shown\n"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = SessionStore(path)
    try:
        assert store.problem is None
        [session] = store.sessions()
        answer = store.messages(session.id)[-1]
        assert (answer.content, answer.status) == ("0 1 2 ", "streaming")
        store.settle(session.id)
        assert store.messages(session.id)[-1].status == "cancelled"
    finally:
        store.close()


def test_sessions_are_listed_newest_first_and_empty_ones_are_not(store: SessionStore) -> None:
    first, second = fill(store, 2)
    store.new_session()  # never used: not listed
    store.add_message(first, "user", "a later question")
    listed = store.sessions()
    assert [s.id for s in listed] == [first, second]
    assert listed[0].messages == 5
    assert store.latest() == first


def test_title_is_the_first_line_of_the_first_user_message(store: SessionStore) -> None:
    sid = store.new_session()
    store.add_message(sid, "user", "\n  Why does my loop never end?\nHere is the code")
    store.add_message(sid, "user", "another question")
    assert store.sessions()[0].title == "Why does my loop never end?"
    long = store.new_session()
    store.add_message(long, "user", "x" * 200)
    assert len(store.sessions()[0].title) == 60


def test_system_prompt_is_set_shown_and_removed(store: SessionStore) -> None:
    sid = store.new_session(system="Answer in French.")
    assert store.system(sid) == "Answer in French."
    store.set_system(sid, "Be brief.")
    assert store.system(sid) == "Be brief."
    store.set_system(sid, None)
    assert store.system(sid) is None


def test_clear_forgets_messages_but_keeps_the_system_prompt(store: SessionStore) -> None:
    [sid] = fill(store, 1)
    store.set_system(sid, "Be brief.")
    store.clear(sid)
    assert store.messages(sid) == [] and store.system(sid) == "Be brief."
    assert store.sessions() == []


def test_status_and_statistics_are_kept_with_the_answer(store: SessionStore) -> None:
    sid = store.new_session()
    mid = store.add_message(sid, "assistant", "partial", status="streaming")
    store.set_status(mid, "cancelled", {"committed_tokens": 3})
    assert store.messages(sid)[0].status == "cancelled"
    assert store.stats(sid) == [{"committed_tokens": 3}]
    with pytest.raises(ValueError, match="status must be one of"):
        store.set_status(mid, "finished")


def test_one_store_serves_several_threads(store: SessionStore) -> None:
    sid = store.new_session()
    mid = store.add_message(sid, "assistant", "", status="streaming")
    workers = [threading.Thread(target=lambda: [store.append(mid, "x") for _ in range(50)]) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert store.messages(sid)[0].content == "x" * 200


def test_a_file_of_garbage_is_moved_aside_and_the_store_starts_empty(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    path.write_bytes(os.urandom(4096))
    store = SessionStore(path)
    try:
        assert store.problem is not None
        assert str(path) in store.problem and "no session could be read" in store.problem
        [aside] = tmp_path.glob("sessions.sqlite3.damaged-*")
        assert str(aside) in store.problem and len(store.problem.splitlines()) == 1
        assert store.sessions() == []
        sid = store.new_session()
        store.add_message(sid, "user", "works again")
        assert store.latest() == sid
    finally:
        store.close()
    again = SessionStore(path)
    try:
        assert again.problem is None and len(again.sessions()) == 1
    finally:
        again.close()


def test_a_truncated_file_keeps_the_sessions_that_can_still_be_read(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    original = SessionStore(path)
    ids = fill(original, 20, body="x" * 3000)  # long messages: the file spans many pages
    original.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    store = SessionStore(path)
    try:
        assert store.problem is not None and "kept " in store.problem and "of the 20 sessions" in store.problem
        kept = [s.id for s in store.sessions()]
        assert 0 < len(kept) < 20 and set(kept) <= set(ids)
        for sid in kept:  # kept sessions are whole, under their old ids
            contents = [m.content for m in store.messages(sid)]
            assert len(contents) == 4 and contents[0].startswith(f"session {ids.index(sid)} message 0")
        assert len(list(tmp_path.glob("sessions.sqlite3.damaged-*"))) == 1
    finally:
        store.close()


class _InterruptedAfterBegin:
    """A connection where Ctrl-C lands the moment ``BEGIN`` has returned, before anything else runs."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.armed = True

    def __getattr__(self, name: str) -> object:
        return getattr(self.conn, name)

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        cursor = self.conn.execute(sql, *args)
        if sql.startswith("BEGIN") and self.armed:
            self.armed = False
            raise KeyboardInterrupt
        return cursor


def test_a_write_interrupted_just_after_it_began_leaves_no_transaction_open(store: SessionStore) -> None:
    sid = store.new_session()
    answer = store.add_message(sid, "assistant", "kept", status="streaming")
    store._conn = _InterruptedAfterBegin(store._conn)  # type: ignore[assignment]
    with pytest.raises(KeyboardInterrupt):
        store.append(answer, " lost")
    store.append(answer, " and more")  # before: "cannot start a transaction within a transaction"
    assert store.messages(sid)[-1].content == "kept and more"


def test_a_listed_title_cannot_drive_the_terminal() -> None:
    line = session_line(SessionInfo(3, "clear \x1b[2J the screen", 0.0, 0.0, 1))
    assert "\x1b" not in line and line.startswith("#3 ") and line.endswith("clear ␛[2J the screen  (1 message)")
