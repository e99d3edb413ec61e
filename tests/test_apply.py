"""/apply and /undo: which file a block of the last answer belongs to, what is written (atomically, mode and
links kept), what is refused with nothing written, and what /undo restores.

Each answer is stored as ``Conversation.send`` stores one (``file_helpers.store_answer``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from file_helpers import GREET, RENAMED, UTIL, make_project
from file_helpers import store_answer as answer

from ds4spec.errors import UsageError
from ds4spec.faces.shared.conversation import Conversation
from ds4spec.faces.shared.sessions import SessionStore
from ds4spec.faces.shared.slash import CommandResult, run_command


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_project(tmp_path / "project")
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def conv(tmp_path: Path, project: Path) -> Iterator[Conversation]:
    store = SessionStore(tmp_path / "sessions.sqlite3")
    conversation = Conversation(None, store)  # /apply needs no model: the answers are stored below
    run_command("/add greet.py", conversation)
    yield conversation
    store.close()


def apply(conv: Conversation, arg: str = "") -> str:
    """``/apply``, confirmed with a yes."""
    result: CommandResult = run_command(f"/apply {arg}".strip(), conv)
    assert result.confirm is not None
    return result.confirm.accept()


def test_a_whole_file_named_on_the_line_above_is_shown_as_a_diff_then_written(project: Path,
                                                                              conv: Conversation) -> None:
    answer(conv, f"Here it is.\n\ngreet.py\n```python\n{RENAMED}```\n")
    result = run_command("/apply", conv)
    assert result.message == "greet.py: +2 -2 lines"
    assert result.confirm is not None and result.confirm.question == "Write this change to greet.py?"
    assert result.confirm.diff.startswith("--- a/greet.py\n+++ b/greet.py\n@@ ")
    assert "-def hello(name):\n+def greet(name):\n" in result.confirm.diff
    assert (project / "greet.py").read_text() == GREET  # nothing before the yes
    assert result.confirm.accept() == "wrote greet.py (+2 -2 lines); /undo restores it"
    assert (project / "greet.py").read_text() == RENAMED


@pytest.mark.parametrize("named", [
    "```python greet.py\n{code}```", "```python:greet.py\n{code}```", "**greet.py**\n```python\n{code}```",
    "### `greet.py`\n\n```python\n{code}```", "In greet.py:\n```\n{code}```",
], ids=["info-string", "info-colon", "bold", "heading", "sentence"])
def test_the_ways_an_answer_names_the_file(project: Path, conv: Conversation, named: str) -> None:
    run_command("/add util.py", conv)  # two files: the block must name its own
    answer(conv, "Sure.\n\n" + named.format(code=RENAMED))
    apply(conv)
    assert (project / "greet.py").read_text() == RENAMED and (project / "util.py").read_text() == UTIL


def test_a_unified_diff_applies_where_its_lines_are_though_its_numbers_are_wrong(project: Path,
                                                                                 conv: Conversation) -> None:
    diff = ("--- a/greet.py\n+++ b/greet.py\n@@ -1,3 +1,3 @@\n-def hello(name):\n+def greet(name):\n"
            '     return "hi " + name\n@@\n-print(hello(sys.argv[1]))\n+print(greet(sys.argv[1]))\n')
    answer(conv, f"```diff\n{diff}```\n")
    assert apply(conv) == "wrote greet.py (+2 -2 lines); /undo restores it"
    assert (project / "greet.py").read_text() == RENAMED


def test_a_diff_that_does_not_apply_is_refused_and_nothing_written(project: Path, conv: Conversation) -> None:
    answer(conv, "```diff\n--- a/greet.py\n+++ b/greet.py\n@@\n-def hullo(name):\n+def greet(name):\n```\n")
    with pytest.raises(UsageError, match=r"^hunk 1 of the diff does not apply to greet.py: 'def hullo\(name\):' "):
        run_command("/apply", conv)
    assert (project / "greet.py").read_text() == GREET


def test_a_fragment_is_never_written_as_the_whole_file(project: Path, conv: Conversation) -> None:
    answer(conv, 'Change the function:\n\n```python\ndef greet(name):\n    return "hi " + name\n```\n')
    with pytest.raises(UsageError, match=r"^the block for greet.py has 2 lines against the file's 4: it looks like a "
                                         r"fragment, not the whole file; ask for the whole file or a unified diff$"):
        run_command("/apply", conv)
    assert (project / "greet.py").read_text() == GREET


def test_with_one_file_in_the_conversation_an_unnamed_block_is_for_it(project: Path, conv: Conversation) -> None:
    answer(conv, f"```python\n{RENAMED}```")
    apply(conv)
    assert (project / "greet.py").read_text() == RENAMED


@pytest.mark.parametrize("text", [
    f"Here is utils.py:\n\n```python\n{RENAMED}```\n",
    f"```python utils.py\n{RENAMED}```\n",
    "```diff\n--- a/other.py\n+++ b/other.py\n@@ -4,2 +4,2 @@\n-def hello(name):\n+def greet(name):\n"
    '     return "hi " + name\n```\n',
], ids=["line-above", "info-string", "diff-header"])
def test_a_block_that_names_another_file_is_not_written_over_the_one_file(project: Path, conv: Conversation,
                                                                          text: str) -> None:
    """One file in the conversation, and the answer's block is for another: written over greet.py, utils.py's
    contents replaced it. Only ``/apply greet.py`` says it is for greet.py after all."""
    answer(conv, text)
    with pytest.raises(UsageError, match=r"^the answer's code is for a file that was not in the conversation, not "
                                         r"greet.py; /apply greet.py writes it there anyway$"):
        run_command("/apply", conv)
    assert (project / "greet.py").read_text() == GREET
    apply(conv, "greet.py")
    assert "def greet(name):" in (project / "greet.py").read_text()


def test_a_module_named_on_the_line_above_is_no_file(project: Path, conv: Conversation) -> None:
    """"Using os.path:" names a module, not a file: the block is still the one file's."""
    answer(conv, f"Using os.path and re.sub:\n\n```python\n{RENAMED}```")
    apply(conv)
    assert (project / "greet.py").read_text() == RENAMED


def test_with_two_files_an_unnamed_block_needs_the_path(project: Path, conv: Conversation) -> None:
    run_command("/add util.py", conv)
    answer(conv, f"```python\n{RENAMED}```")
    with pytest.raises(UsageError, match=r"^the answer names no file in the conversation; /apply PATH says which"):
        run_command("/apply", conv)
    apply(conv, "greet.py")
    assert (project / "greet.py").read_text() == RENAMED


def test_blocks_for_two_files_need_the_path(project: Path, conv: Conversation) -> None:
    run_command("/add util.py", conv)
    answer(conv, f"greet.py\n```python\n{RENAMED}```\n\nutil.py\n```python\n{UTIL.replace('2 *', '2*')}```\n")
    with pytest.raises(UsageError, match=r"^the answer has blocks for greet.py and util.py; name one, as in /apply "):
        run_command("/apply", conv)
    apply(conv, "util.py")
    assert (project / "util.py").read_text() == UTIL.replace("2 *", "2*")
    assert (project / "greet.py").read_text() == GREET


@pytest.mark.parametrize(("text", "arg", "why"), [
    ("No code here.", "", "the last answer has no complete code block"),
    (f"greet.py\n```python\n{RENAMED}", "", "the last answer has no complete code block"),
    (f"greet.py\n```python\n{GREET}```", "", "the block leaves greet.py as it is"),
    (f"```python\n{RENAMED}```", "other.py", "other.py was not in the conversation when the answer was written"),
], ids=["no-block", "cut-off-block", "no-change", "path-not-in-conversation"])
def test_answers_that_cannot_be_applied_say_why(project: Path, conv: Conversation, text: str, arg: str,
                                                why: str) -> None:
    answer(conv, text)
    with pytest.raises(UsageError, match=f"^{why}$"):
        run_command(f"/apply {arg}", conv)
    assert (project / "greet.py").read_text() == GREET


def test_an_answer_written_with_no_file_in_the_conversation_is_refused(project: Path, conv: Conversation) -> None:
    run_command("/drop all", conv)
    answer(conv, f"greet.py\n```python\n{RENAMED}```")
    with pytest.raises(UsageError, match=r"^no file was in the conversation when the last answer was written"):
        run_command("/apply", conv)


def test_a_file_changed_on_disk_since_the_answer_is_refused(project: Path, conv: Conversation) -> None:
    answer(conv, f"greet.py\n```python\n{RENAMED}```")
    (project / "greet.py").write_text(GREET + "# edited by hand\n")
    with pytest.raises(UsageError, match=r"^greet.py changed on disk since the answer was written; ask again"):
        run_command("/apply", conv)
    assert (project / "greet.py").read_text().endswith("# edited by hand\n")


def test_a_file_changed_while_the_change_was_shown_is_not_written(project: Path, conv: Conversation) -> None:
    answer(conv, f"greet.py\n```python\n{RENAMED}```")
    result = run_command("/apply", conv)
    (project / "greet.py").write_text(GREET + "# typed meanwhile\n")
    assert result.confirm is not None
    with pytest.raises(UsageError, match=r"^greet.py changed on disk while the change was shown; nothing was written$"):
        result.confirm.accept()
    assert (project / "greet.py").read_text().endswith("# typed meanwhile\n")


def test_the_write_keeps_the_mode_and_leaves_no_temporary_file(project: Path, conv: Conversation) -> None:
    os.chmod(project / "greet.py", 0o751)
    answer(conv, f"greet.py\n```python\n{RENAMED}```")
    apply(conv)
    assert stat.S_IMODE((project / "greet.py").stat().st_mode) == 0o751
    assert sorted(p.name for p in project.iterdir()) == ["greet.py", "util.py"]


def test_a_symlink_is_written_through_not_replaced(project: Path, tmp_path: Path, conv: Conversation) -> None:
    real = tmp_path / "elsewhere.py"
    real.write_text(GREET)
    (project / "link.py").symlink_to(real)
    run_command("/drop all", conv)
    run_command("/add link.py", conv)
    answer(conv, f"link.py\n```python\n{RENAMED}```")
    apply(conv)
    assert (project / "link.py").is_symlink() and real.read_text() == RENAMED


def test_a_read_only_file_is_refused(project: Path, conv: Conversation) -> None:
    os.chmod(project / "greet.py", 0o444)
    answer(conv, f"greet.py\n```python\n{RENAMED}```")
    with pytest.raises(UsageError, match=r"^cannot write greet.py: it is read-only or its folder is not writable$"):
        apply(conv)
    assert (project / "greet.py").read_text() == GREET


def test_windows_line_endings_are_kept(project: Path, conv: Conversation) -> None:
    (project / "greet.py").write_bytes(GREET.replace("\n", "\r\n").encode())
    conv.files.refresh()
    answer(conv, f"greet.py\n```python\n{RENAMED}```")
    apply(conv)
    assert (project / "greet.py").read_bytes() == RENAMED.replace("\n", "\r\n").encode()


def test_the_next_message_sees_the_applied_file_without_a_changed_on_disk_note(project: Path,
                                                                               conv: Conversation) -> None:
    answer(conv, f"greet.py\n```python\n{RENAMED}```")
    apply(conv)
    assert conv.files.refresh() == [] and "def greet(name):" in conv.messages("next")[-1].content


def test_undo_restores_what_apply_replaced_and_says_so(project: Path, conv: Conversation) -> None:
    answer(conv, f"greet.py\n```python\n{RENAMED}```")
    apply(conv)
    assert run_command("/undo", conv).message == "restored greet.py as it was before /apply (+2 -2 lines)"
    assert (project / "greet.py").read_text() == GREET
    with pytest.raises(UsageError, match=r"^no /apply to undo in this session$"):
        run_command("/undo", conv)


def test_undo_takes_back_each_files_last_change(project: Path, conv: Conversation) -> None:
    run_command("/add util.py", conv)
    answer(conv, f"greet.py\n```python\n{RENAMED}```")
    apply(conv)
    answer(conv, f"util.py\n```python\n{UTIL.replace('2 *', '2*')}```")
    apply(conv)
    run_command("/undo greet.py", conv)
    assert (project / "greet.py").read_text() == GREET and (project / "util.py").read_text() != UTIL
    with pytest.raises(UsageError, match=r"^no change to greet.py to undo$"):
        run_command("/undo greet.py", conv)
    run_command("/undo", conv)
    assert (project / "util.py").read_text() == UTIL


def test_undo_refuses_a_file_changed_since_apply(project: Path, conv: Conversation) -> None:
    answer(conv, f"greet.py\n```python\n{RENAMED}```")
    apply(conv)
    (project / "greet.py").write_text(RENAMED + "# more work\n")
    with pytest.raises(UsageError, match=r"^greet.py changed on disk since /apply wrote it; not restored"):
        run_command("/undo", conv)
    assert (project / "greet.py").read_text().endswith("# more work\n")


def test_undo_survives_a_restart(project: Path, tmp_path: Path, conv: Conversation) -> None:
    answer(conv, f"greet.py\n```python\n{RENAMED}```")
    apply(conv)
    resumed = Conversation(None, conv.store, conv.session_id)
    run_command("/undo", resumed)
    assert (project / "greet.py").read_text() == GREET
