"""The slash commands for files in the conversation: ``/add``, ``/drop``, ``/files``, ``/apply`` and ``/undo``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ds4spec.engine.context_files import fenced
from ds4spec.engine.engine import Engine
from ds4spec.errors import InputError, UsageError
from ds4spec.faces.shared import edits
from ds4spec.faces.shared.command_result import CommandResult, Confirmation
from ds4spec.faces.shared.conversation import Conversation
from ds4spec.faces.shared.files import FileSnapshot, expand, read_file, shown_name

FILE_COMMANDS: dict[str, str] = {
    "add": "put files into the conversation (paths or patterns such as src/*.py)",
    "drop": "take files out of the conversation (all: every one)",
    "files": "list the files in the conversation, their size in tokens, and the context left",
    "apply": "write the last answer's code block to its file, after showing the change",
    "undo": "restore the file the last /apply wrote (or PATH's last one)",
}
FILE_ARGUMENTS: dict[str, str] = {"add": "PATH...", "drop": "PATH...|all", "apply": "[PATH]", "undo": "[PATH]"}


def _add(conv: Conversation, arg: str) -> CommandResult:
    if not arg:
        raise UsageError("/add needs a path or a pattern, as in /add src/*.py")
    new = [read_file(p) for p in expand(arg) if p not in conv.files.snapshots]
    if not new:
        return CommandResult("already in the conversation; /files lists what is")
    room = _check_room(conv, new)
    conv.files.add(new)
    names = ", ".join(s.name for s in new)
    size = "" if room is None or conv.engine is None else f" ({room[0]:,} tokens; {_left(conv.engine, room[1])})"
    return CommandResult(f"added {names}{size}")


def _check_room(conv: Conversation, new: Sequence[FileSnapshot]) -> tuple[int, int] | None:
    """The new files' size in tokens and the conversation's with them; ``InputError`` with both sizes when they
    would overflow the context."""
    engine = conv.engine
    if engine is None:
        return None  # sizes are checked when the message is sent
    tokens = sum(_tokens(engine, s) for s in new)
    used = engine.chat_size(conv.messages("", new))
    if used >= engine.target.n_ctx:
        names = ", ".join(s.name for s in new)
        free = max(0, engine.target.n_ctx - engine.chat_size(conv.messages("")))
        raise InputError(f"{names} would take {tokens:,} tokens, but only {free:,} of the context's "
                         f"{engine.target.n_ctx:,} are free (--ctx raises it)")
    return tokens, used


def _tokens(engine: Engine, snapshot: FileSnapshot) -> int:
    return engine.token_count(fenced(snapshot.name, snapshot.text))


def _left(engine: Engine, used: int) -> str:
    """What is left of the context when the conversation takes ``used`` tokens."""
    return f"{max(0, engine.target.n_ctx - used):,} of the context's {engine.target.n_ctx:,} tokens left"


def _drop(conv: Conversation, arg: str) -> CommandResult:
    if not arg:
        raise UsageError("/drop needs a path, a pattern or all")
    if arg.strip() == "all":
        paths = list(conv.files.snapshots)
        if not paths:
            return CommandResult("no file is in the conversation")
    else:
        paths = expand(arg)
        if set("*?[") & set(arg):  # a pattern drops what it matches among the files in; a name must be in
            paths = [p for p in paths if p in conv.files.snapshots]
        if not paths:
            raise InputError(f"no file in the conversation matches {arg}; /files lists them")
    conv.files.drop(paths)
    return CommandResult("dropped " + ", ".join(shown_name(p) for p in paths))


def _files(conv: Conversation, arg: str) -> CommandResult:
    if arg:
        raise UsageError("/files takes no argument")
    lines = [*conv.take_notes(), *conv.files.refresh()]
    snapshots = list(conv.files.snapshots.values())
    if not snapshots:
        lines.append("no file is in the conversation; /add PATH puts one in")
        return CommandResult("\n".join(lines))
    engine = conv.engine
    width = max(len(s.name) for s in snapshots) + 2
    for s in snapshots:
        size = f"{_tokens(engine, s):>8,} tokens" if engine is not None else f"{len(s.text.encode()):>8,} bytes"
        lines.append(f"{s.name:<{width}}{size}")
    lines.append(_left(engine, engine.chat_size(conv.messages(""))) if engine is not None
                 else "(sizes in tokens once the model has loaded)")
    return CommandResult("\n".join(lines))


def _apply(conv: Conversation, arg: str) -> CommandResult:
    change = edits.propose(conv, arg)
    return CommandResult(f"{change.name}: {change.counts()}",
                         confirm=Confirmation(f"Write this change to {change.name}?", change.diff,
                                              lambda: edits.write(conv, change)))


def _undo(conv: Conversation, arg: str) -> CommandResult:
    return CommandResult(edits.undo(conv, arg))


FILE_HANDLERS: dict[str, Callable[[Conversation, str], CommandResult]] = {
    "add": _add, "drop": _drop, "files": _files, "apply": _apply, "undo": _undo,
}
