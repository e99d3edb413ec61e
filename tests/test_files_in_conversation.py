"""Files in the conversation, on the tiny model: /add, /drop, /files and @path, what the model is shown, what
is refused, and what a session keeps."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from ds4spec.backend.prompt import ChatMessage
from ds4spec.bench.workloads import load_tasks
from ds4spec.engine.context_files import HEADING
from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings
from ds4spec.errors import InputError, UsageError
from ds4spec.faces.shared.conversation import Conversation
from ds4spec.faces.shared.session_db import SCHEMA_VERSION
from ds4spec.faces.shared.sessions import SessionStore
from ds4spec.faces.shared.slash import run_command

GREET = 'def hello(name):\n    return "hi " + name\n'


@pytest.fixture(scope="module")
def engine(tiny_bpe_gguf: Path) -> Iterator[Engine]:
    with Engine.load(Settings(target=str(tiny_bpe_gguf), draft="lookup", warmup=0, max_tokens=8,
                              ctx=1024)) as e:
        yield e


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with a small Python project in it."""
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "greet.py").write_text(GREET)
    (root / "src" / "util.py").write_text("def twice(x):\n    return 2 * x\n")
    (root / "src" / "notes.md").write_text("# Notes\n\n```sh\nls\n```\n")
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def conv(engine: Engine, tmp_path: Path) -> Iterator[Conversation]:
    store = SessionStore(tmp_path / "sessions.sqlite3")
    yield Conversation(engine, store)
    store.close()


def test_an_added_file_comes_in_front_of_the_next_message_fenced_with_its_language(project: Path,
                                                                                   conv: Conversation) -> None:
    result = run_command("/add greet.py", conv)
    assert result.message.startswith("added greet.py (") and "tokens left" in result.message
    shown = conv.messages("Rename hello to greet.")[-1]
    assert shown == ChatMessage("user", f"{HEADING}\n\ngreet.py\n```python\n{GREET}```\n\nRename hello to greet.")


def test_a_file_with_fences_of_its_own_gets_a_longer_fence(project: Path, conv: Conversation) -> None:
    run_command("/add src/notes.md", conv)
    assert "src/notes.md\n````markdown\n# Notes\n\n```sh\nls\n```\n````\n" in conv.messages("x")[-1].content


def test_add_takes_patterns_and_several_paths_and_skips_files_already_in(project: Path, conv: Conversation) -> None:
    run_command("/add greet.py", conv)
    result = run_command("/add 'src/*.py' greet.py **/*.md", conv)
    assert result.message.startswith("added src/util.py, src/notes.md (")
    assert [p.name for p in conv.files.snapshots] == ["greet.py", "util.py", "notes.md"]
    assert run_command("/add greet.py", conv).message == "already in the conversation; /files lists what is"


def test_files_lists_each_file_with_its_size_in_tokens_and_the_context_left(project: Path, engine: Engine,
                                                                            conv: Conversation) -> None:
    assert run_command("/files", conv).message == "no file is in the conversation; /add PATH puts one in"
    run_command("/add greet.py src/util.py", conv)
    lines = run_command("/files", conv).message.splitlines()
    assert [line.split()[0] for line in lines[:2]] == ["greet.py", "src/util.py"]
    assert all(line.endswith(" tokens") for line in lines[:2])
    left = engine.target.n_ctx - engine.chat_size(conv.messages(""))
    assert lines[2] == f"{left:,} of the context's {engine.target.n_ctx:,} tokens left"


@pytest.mark.parametrize("arg", ["pages/[id].tsx", "'pages/[id].tsx'", "pages/\\[id\\].tsx", "pages/*.tsx"])
def test_a_file_whose_name_holds_pattern_characters_is_added_by_its_name(project: Path, conv: Conversation,
                                                                          arg: str) -> None:
    """A route file of Next.js or SvelteKit: its name, read as a pattern, matches no file; a shell then takes it as
    it is, quoted or not."""
    (project / "pages").mkdir()
    (project / "pages" / "[id].tsx").write_text("export default function Page() {}\n")
    assert run_command(f"/add {arg}", conv).message.startswith("added pages/[id].tsx")


def test_drop_takes_out_one_file_or_all(project: Path, conv: Conversation) -> None:
    run_command("/add greet.py src/util.py", conv)
    assert run_command("/drop greet.py", conv).message == "dropped greet.py"
    assert [p.name for p in conv.files.snapshots] == ["util.py"]
    with pytest.raises(InputError, match=r"greet\.py is not in the conversation"):
        run_command("/drop greet.py", conv)
    assert run_command("/drop all", conv).message == "dropped src/util.py"
    assert conv.messages("x")[-1].content == "x"


def _sparse(path: Path, size: int) -> None:
    with path.open("wb") as f:
        f.truncate(size)


@pytest.mark.parametrize(("make", "arg", "why"), [
    (None, "missing.py", "no such file: missing.py"),
    (None, "src", r"src is a directory: name its files, or a pattern such as src/\*.py"),
    (lambda p: (p / "blob.bin").write_bytes(b"\x7fELF\x00\x01"), "blob.bin", "blob.bin is a binary file, not text"),
    (lambda p: (p / "latin.txt").write_bytes(b"caf\xe9\n"), "latin.txt",
     r"latin.txt is not UTF-8 text \(byte 0xe9 at offset 3\)"),
    (None, "src/*.rs", r"no file matches src/\*.rs"),
    (None, "greet.py 'unclosed", "cannot read the paths: No closing quotation"),
    (lambda p: os.mkfifo(p / "pipe"), "pipe", r"pipe is not a regular file \(a device, a pipe or a socket\)"),
    (None, "/dev/zero", r"/dev/zero is not a regular file \(a device, a pipe or a socket\)"),
    (lambda p: _sparse(p / "huge.log", 17 * 2**20), "huge.log", "huge.log is 17 MiB, more text than any context holds"),
], ids=["missing", "directory", "binary", "not-utf8", "pattern-matching-nothing", "unbalanced-quote", "named-pipe",
        "device", "huge"])
def test_a_bad_path_is_one_line_and_nothing_is_added(project: Path, conv: Conversation, make: object, arg: str,
                                                     why: str) -> None:
    if callable(make):
        make(project)
    with pytest.raises(InputError, match=f"^{why}$"):
        run_command(f"/add {arg}", conv)
    assert conv.files.snapshots == {} and conv.store.files(conv.session_id) == []


def test_a_file_that_would_overflow_the_context_is_refused_with_both_sizes(project: Path, engine: Engine,
                                                                           conv: Conversation) -> None:
    (project / "big.py").write_text("value = 12345\n" * 400)
    with pytest.raises(InputError, match=r"^big.py would take [\d,]+ tokens, but only [\d,]+ of the context's "
                                         r"1,024 are free \(--ctx raises it\)$"):
        run_command("/add big.py", conv)
    assert conv.files.snapshots == {}


def test_a_file_changed_on_disk_is_read_again_before_the_next_message_and_the_user_told(
        project: Path, conv: Conversation) -> None:
    run_command("/add greet.py", conv)
    (project / "greet.py").write_text(GREET + "\nprint(hello('you'))\n")
    list(conv.send("What does it print?"))
    assert conv.take_notes() == ["greet.py changed on disk: the model sees it as it is now"]
    assert "print(hello('you'))" in conv.messages("next")[-1].content
    assert conv.take_notes() == []


def test_the_stored_message_is_what_was_typed_with_the_hashes_of_the_files_it_was_sent_with(
        project: Path, conv: Conversation) -> None:
    run_command("/add greet.py", conv)
    list(conv.send("Explain it."))
    question = conv.history()[0]
    assert question.content == "Explain it."
    assert question.files == {"seen": {str(project / "greet.py"): conv.files.snapshots[project / "greet.py"].sha256},
                              "attached": []}


def test_an_at_path_attaches_an_existing_file_to_its_message_only(project: Path, conv: Conversation) -> None:
    list(conv.send("What does @src/util.py do? And what is @dataclass, or @nowhere.py?"))
    first = conv.messages()[0].content
    assert first.startswith(f"{HEADING}\n\nsrc/util.py\n```python\ndef twice(x):")
    assert first.endswith("What does @src/util.py do? And what is @dataclass, or @nowhere.py?")
    assert conv.files.snapshots == {}  # not added for later messages
    assert conv.messages("next")[-1].content == "next"
    (project / "src" / "util.py").write_text("changed\n")
    assert "def twice(x):" in conv.messages()[0].content  # that message keeps what was sent with it


def test_an_at_path_to_a_binary_file_refuses_the_message(project: Path, conv: Conversation) -> None:
    (project / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(InputError, match=r"^@logo.png: logo.png is a binary file, not text$"):
        conv.send("Describe @logo.png.")
    assert conv.history() == []


def test_the_drafter_is_given_the_files(project: Path, engine: Engine, conv: Conversation) -> None:
    run_command("/add greet.py", conv)
    prompt = engine.chat_prompt(conv.messages("Rename hello."))
    assert prompt.context.messages is not None and GREET in prompt.context.messages[-1].content


def test_a_resumed_session_reads_its_files_again_and_says_which_are_gone(project: Path, engine: Engine,
                                                                         tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions.sqlite3")
    first = Conversation(engine, store)
    run_command("/add greet.py src/util.py", first)
    list(first.send("hi"))
    (project / "greet.py").write_text("def greet(name):\n    pass\n")
    (project / "src" / "util.py").unlink()
    again = Conversation(engine, store, first.session_id)
    assert again.take_notes() == ["src/util.py is gone: dropped it from the conversation"]
    assert list(again.files.snapshots) == [project / "greet.py"]
    assert "def greet(name):" in again.messages("x")[-1].content
    assert store.files(first.session_id) == [str(project / "greet.py")]
    store.close()


def test_new_keeps_the_files_and_clear_keeps_them_too(project: Path, conv: Conversation) -> None:
    run_command("/add greet.py", conv)
    run_command("/new", conv)
    assert conv.store.files(conv.session_id) == [str(project / "greet.py")]
    run_command("/clear", conv)
    assert list(conv.files.snapshots) == [project / "greet.py"]


def test_a_symlinked_file_keeps_its_link_as_the_path(project: Path, conv: Conversation) -> None:
    os.symlink(project / "greet.py", project / "link.py")
    run_command("/add link.py", conv)
    assert list(conv.files.snapshots) == [project / "link.py"]


def test_file_commands_need_their_arguments(project: Path, conv: Conversation) -> None:
    with pytest.raises(UsageError, match=r"^/add needs a path or a pattern"):
        run_command("/add", conv)
    with pytest.raises(UsageError, match=r"^/files takes no argument$"):
        run_command("/files now", conv)


def test_a_version_1_session_file_is_migrated_and_keeps_its_sessions(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    old = sqlite3.connect(path)
    old.executescript("""
        CREATE TABLE sessions (id INTEGER PRIMARY KEY, title TEXT NOT NULL DEFAULT '', system TEXT,
                               created REAL NOT NULL, updated REAL NOT NULL);
        CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id INTEGER NOT NULL REFERENCES sessions(id),
                               role TEXT NOT NULL, content TEXT NOT NULL, status TEXT NOT NULL, stats TEXT,
                               created REAL NOT NULL);
        INSERT INTO sessions VALUES (1, 'hello', NULL, 1.0, 2.0);
        INSERT INTO messages VALUES (1, 1, 'user', 'hello', 'done', NULL, 1.0);
        PRAGMA user_version = 1;
    """)
    old.close()
    store = SessionStore(path)
    assert store.problem is None
    assert [(m.content, m.files) for m in store.messages(1)] == [("hello", None)]
    store.add_files(1, ["/x.py"])
    assert store.files(1) == ["/x.py"]
    assert store._read("PRAGMA user_version") == [(SCHEMA_VERSION,)]
    store.close()


def test_the_bench_files_workload_asks_as_the_chat_does_after_add(project: Path, conv: Conversation) -> None:
    task = load_tasks("files", 1)[0]
    (project / "has_close_elements.py").write_text(load_tasks("edits", 1)[0].messages[0].content  # type: ignore[index]
                                                   .split("```python\n", 1)[1].rsplit("```", 1)[0])
    run_command("/add has_close_elements.py", conv)
    question = task.messages[0].content.rsplit("\n", 1)[-1]  # type: ignore[index]
    assert "everywhere in has_close_elements.py," in question
    assert conv.messages(question)[-1] == task.messages[0]  # type: ignore[index]
