"""``/apply`` and ``/undo``: a code block of the last answer written to the file it belongs to, and taken back.

Which file a block belongs to, in order:

1. a unified diff: the file its ``+++`` header names;
2. a block whose info string names a file (````` ```python greet.py `````), or whose line just above names
   one (``greet.py``, ``**greet.py**``, ``### `greet.py```, ``In greet.py:``): that file;
3. otherwise, with ``/apply PATH``, or when only one file was in the conversation: the answer's one block
   that names no file (two such blocks are ambiguous, and refused). A block that names a file the conversation
   does not hold (a diff's ``+++ b/utils.py``, ```` ```python utils.py ````, ``utils.py:`` just above) is that
   file's, not the one file's: written over it, another file's contents replaced it. Only ``/apply PATH`` takes
   such a block for ``PATH``.

A name matches a file the answer saw (added, or attached by ``@path``) by its path as shown, or by its base
name when only one of those files has it. A block that is not a diff replaces the whole file, unless it has
half the file's non-blank lines or fewer: that is a fragment (a function, a few changed lines), refused
rather than written over the whole file. Nothing is written when the file changed on disk since the answer
was written (the model edited a version that is gone), when a diff does not apply, or when the answer names
no file in the conversation; each is one line saying so.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ds4spec.errors import InputError, UsageError
from ds4spec.faces.shared.conversation import Conversation
from ds4spec.faces.shared.conversation_files import SentFiles
from ds4spec.faces.shared.fences import CodeBlock, code_blocks
from ds4spec.faces.shared.files import FileSnapshot, absolute, read_file, shown_name, write_atomically
from ds4spec.faces.shared.hunks import apply_hunks, diff_target, is_diff, parse_hunks

_NAME_PUNCTUATION = "`*_:#'\"()[],"
# A word of the line above a block names a file when it ends in one of these ("Using os.path:" names none).
_CODE_EXTENSIONS = frozenset({
    "py", "pyi", "js", "jsx", "ts", "tsx", "mjs", "cjs", "rs", "go", "c", "h", "cc", "cpp", "cxx", "hpp", "cs",
    "java", "kt", "kts", "rb", "php", "swift", "sh", "bash", "zsh", "fish", "lua", "md", "txt", "json", "toml",
    "yaml", "yml", "ini", "cfg", "conf", "html", "htm", "css", "scss", "sql", "vim", "el", "ex", "exs", "hs", "ml",
    "scala", "r", "jl", "dart", "vue", "svelte", "zig", "nim", "mk", "cmake", "gradle", "xml", "proto", "tf"
})
_FILE_NAME = re.compile(r"[\w.~/-]*\w\.([A-Za-z][A-Za-z0-9]{0,7})")


class _Elsewhere:
    """The owner of a block that names a file the conversation does not hold."""


ELSEWHERE = _Elsewhere()


@dataclass(frozen=True)
class ProposedChange:
    path: Path
    before: FileSnapshot  # the file as it is now, which the change was computed from
    after: str
    diff: str  # unified, for the user to confirm

    @property
    def name(self) -> str:
        return shown_name(self.path)

    def counts(self) -> str:
        return _counts(self.diff)


def propose(conv: Conversation, path_arg: str = "") -> ProposedChange:
    """The change ``/apply [PATH]`` would write; ``UsageError`` with the reason when there is none."""
    sent, answer = _last_exchange(conv)
    versions = sent.versions()
    if not versions:
        raise UsageError("no file was in the conversation when the last answer was written; /add it and ask again")
    blocks = [b for b in code_blocks(answer) if b.closed]
    if not blocks:
        raise UsageError("the last answer has no complete code block")
    owners = [_owner(b, answer, list(versions)) for b in blocks]
    path, block = _choose(blocks, owners, list(versions), path_arg)
    current = read_file(path)
    if current.sha256 != versions[path]:
        raise UsageError(f"{current.name} changed on disk since the answer was written; ask again so that the model "
                         "sees it as it is")
    return _change(current, block)


def write(conv: Conversation, change: ProposedChange) -> str:
    """Writes a confirmed change, unless the file changed while the user looked at it; kept for ``/undo``."""
    if read_file(change.path).sha256 != change.before.sha256:
        raise UsageError(f"{change.name} changed on disk while the change was shown; nothing was written")
    after_sha = write_atomically(change.path, change.after)
    conv.store.record_apply(conv.session_id, str(change.path), change.before.text, after_sha)
    _reread(conv, change.path)
    return f"wrote {change.name} ({change.counts()}); /undo restores it"


def undo(conv: Conversation, path_arg: str = "") -> str:
    """Restores the file the last ``/apply`` (to ``PATH``) wrote, if nobody changed it since."""
    path = absolute(path_arg) if path_arg else None
    applied = conv.store.last_apply(conv.session_id, None if path is None else str(path))
    if applied is None:
        raise UsageError(f"no change to {path_arg} to undo" if path_arg else "no /apply to undo in this session")
    target = Path(applied.path)
    name = shown_name(target)
    try:
        now = read_file(target)
    except InputError as err:
        raise UsageError(f"cannot undo: {err}") from None
    if now.sha256 != applied.after_sha256:
        raise UsageError(f"{name} changed on disk since /apply wrote it; not restored, so that nothing is lost")
    write_atomically(target, applied.before)
    conv.store.mark_undone(applied.id)
    _reread(conv, target)
    return f"restored {name} as it was before /apply ({_counts(_diff(name, now.text, applied.before))})"


def _last_exchange(conv: Conversation) -> tuple[SentFiles, str]:
    history = conv.history()
    for i in range(len(history) - 1, -1, -1):
        m = history[i]
        if m.role == "assistant" and m.content:
            asked = next((u for u in reversed(history[:i]) if u.role == "user"), None)
            return SentFiles.from_json(asked.files if asked else None), m.content
    raise UsageError("there is no answer to apply yet")


def _owner(block: CodeBlock, answer: str, paths: list[Path]) -> Path | _Elsewhere | None:
    """The file the block names among ``paths``; ``ELSEWHERE`` when it names only another file; None: no file."""
    if is_diff(block.code):
        named = diff_target(block.code)
        return (_match(named, paths) or ELSEWHERE) if named else None
    words = _info_words(block)
    for word in words[1:] + words[:1]:
        if (found := _match(word, paths)) is not None:
            return found
    above = [word.strip(_NAME_PUNCTUATION) for word in _line_above(answer, block).split()]
    for word in reversed(above):
        if (found := _match(word, paths)) is not None:
            return found
    if any(_FILE_NAME.fullmatch(word) for word in words[1:]) or any(
            (m := _FILE_NAME.fullmatch(word)) and m.group(1).lower() in _CODE_EXTENSIONS for word in above):
        return ELSEWHERE
    return None


def _info_words(block: CodeBlock) -> list[str]:
    """The words of the block's info string (```` ```python greet.py ````, ```` ```python:greet.py ````)."""
    info = block.info.replace(":", " ").replace("title=", " ")
    return [w.strip(_NAME_PUNCTUATION) for w in info.split()]


def _line_above(answer: str, block: CodeBlock) -> str:
    above = [line for line in answer.splitlines()[:block.line] if line.strip()]
    return above[-1] if above else ""


def _match(name: str | None, paths: list[Path]) -> Path | None:
    if not name:
        return None
    for path in paths:
        if shown_name(path) == name or str(path) == name or path == absolute(name):
            return path
    same_base = [p for p in paths if p.name == Path(name).name]
    return same_base[0] if len(same_base) == 1 else None


def _choose(blocks: list[CodeBlock], owners: list[Path | _Elsewhere | None], paths: list[Path],
            path_arg: str) -> tuple[Path, CodeBlock]:
    if path_arg:
        path = absolute(path_arg)
        if path not in paths:
            raise UsageError(f"{path_arg} was not in the conversation when the answer was written")
        owners = [None if o is ELSEWHERE else o for o in owners]  # the user says whose it is
    else:
        named = list(dict.fromkeys(o for o in owners if isinstance(o, Path)))
        if len(named) > 1:
            listed = " and ".join(shown_name(p) for p in named)
            raise UsageError(f"the answer has blocks for {listed}; name one, as in /apply {shown_name(named[0])}")
        if not named and len(paths) > 1:
            raise UsageError("the answer names no file in the conversation; /apply PATH says which file it is for")
        path = named[0] if named else paths[0]
    mine = [b for b, o in zip(blocks, owners, strict=True) if o == path]
    if mine:
        return path, mine[-1]
    unnamed = [b for b, o in zip(blocks, owners, strict=True) if o is None]
    if len(unnamed) == 1:
        return path, unnamed[0]
    if not unnamed and ELSEWHERE in owners:
        raise UsageError(f"the answer's code is for a file that was not in the conversation, not {shown_name(path)}; "
                         f"/apply {shown_name(path)} writes it there anyway")
    why = "no code block" if not unnamed else f"{len(unnamed)} code blocks that name no file"
    raise UsageError(f"the answer has {why} for {shown_name(path)}")


def _change(current: FileSnapshot, block: CodeBlock) -> ProposedChange:
    crlf = "\r\n" in current.text
    text = current.text.replace("\r\n", "\n")
    if is_diff(block.code):
        after = apply_hunks(text, parse_hunks(block.code), current.name)
    else:
        kept, whole = _non_blank(block.code), _non_blank(text)
        if kept * 2 <= whole:
            raise UsageError(f"the block for {current.name} has {kept} lines against the file's {whole}: it looks "
                             "like a fragment, not the whole file; ask for the whole file or a unified diff")
        after = block.code if text.endswith("\n") or not text else block.code.rstrip("\n")
    if crlf:
        after = after.replace("\n", "\r\n")
    if after == current.text:
        raise UsageError(f"the block leaves {current.name} as it is")
    return ProposedChange(current.path, current, after, _diff(current.name, current.text, after))


def _non_blank(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


def _diff(name: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        f"a/{name}", f"b/{name}"))


def _counts(diff: str) -> str:
    lines = diff.splitlines()
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    return f"+{added} -{removed} lines"


def _reread(conv: Conversation, path: Path) -> None:
    """The model is shown the file as written, with no 'changed on disk' note for a change of our own."""
    if path in conv.files.snapshots and os.path.exists(path):
        conv.files.snapshots[path] = read_file(path)
