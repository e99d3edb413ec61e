"""The slash commands that ``ds4spec chat`` and ``ds4spec repl`` share.

A line is a command when its first word is a slash and a name (``/save notes.md``); a line such as
``/usr/bin/python crashes`` is a message. ``run_command`` returns what the face shows; a bad command or
argument raises ``UsageError``, and a drafter that fails to load raises the loader's error (one line each).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ds4spec.engine.engine import Engine
from ds4spec.errors import UsageError
from ds4spec.faces.shared.command_result import CommandResult, Confirmation
from ds4spec.faces.shared.conversation import Conversation
from ds4spec.faces.shared.files import absolute, shown_name
from ds4spec.faces.shared.slash_files import FILE_ARGUMENTS, FILE_COMMANDS, FILE_HANDLERS
from ds4spec.faces.shared.stats_text import answer_line, from_dict, totals

COMMANDS: dict[str, str] = {
    "new": "start a new session (the current one stays saved)",
    "clear": "forget this session's messages (the system prompt stays)",
    "save": "write the conversation to FILE as Markdown",
    "spec": "speculate with the loaded drafter (on) or decode plainly (off); alone: say which",
    "draft": "load another drafter: a model name or path, lookup, hybrid or none",
    "stats": "statistics of the last answer, and totals for this session",
    "system": "set the system prompt to TEXT; alone: show it; with -: remove it",
    "copy": "copy the last code block (else the last answer) to the clipboard",
    **FILE_COMMANDS,
    "help": "list the commands",
}
ARGUMENTS: dict[str, str] = {"save": "FILE", "spec": "[on|off]", "draft": "NAME", "system": "[TEXT|-]",
                             **FILE_ARGUMENTS}
__all__ = ["ARGUMENTS", "COMMANDS", "CommandResult", "Confirmation", "is_command", "run_command"]

_COMMAND = re.compile(r"^/(?P<name>[A-Za-z][\w-]*)(?:\s+(?P<arg>.*))?$", re.DOTALL)


def is_command(line: str) -> bool:
    return _COMMAND.match(line.strip()) is not None


def run_command(line: str, conv: Conversation) -> CommandResult:
    match = _COMMAND.match(line.strip())
    if not match:
        raise UsageError(f"not a command: {line.strip()!r}")
    name, arg = match["name"].lower(), (match["arg"] or "").strip()
    handler = _HANDLERS.get(name)
    if handler is None:
        raise UsageError(f"unknown command /{name}; /help lists the commands")
    return handler(conv, arg)


def _no_arg(name: str, arg: str) -> None:
    if arg:
        raise UsageError(f"/{name} takes no argument")


def _engine(conv: Conversation) -> Engine:
    if conv.engine is None:
        raise UsageError("the model is still loading")
    return conv.engine


def _new(conv: Conversation, arg: str) -> CommandResult:
    _no_arg("new", arg)
    conv.new()
    return CommandResult(f"new session {conv.session_id}", cleared=True)


def _clear(conv: Conversation, arg: str) -> CommandResult:
    _no_arg("clear", arg)
    conv.clear()
    return CommandResult("cleared the conversation", cleared=True)


def _save(conv: Conversation, arg: str) -> CommandResult:
    """Writes the conversation as Markdown to a new file, or over an existing one once the user says yes; never over
    a file in the conversation (it turned a source file into Markdown, with nothing for ``/undo`` to restore)."""
    if not arg:
        raise UsageError("/save needs a file name, as in /save notes.md")
    path = absolute(arg)
    if arg.endswith("/") or path.is_dir():
        raise UsageError(f"{arg} is a directory; /save needs a file name, as in /save {arg.rstrip('/')}/notes.md")
    if path in conv.files.snapshots:
        raise UsageError(f"{shown_name(path)} is in the conversation; /save writes the conversation to another file")
    if path.exists():
        confirm = Confirmation(f"Replace {shown_name(path)} with the conversation?", "", lambda: _saved(conv, arg))
        return CommandResult(f"{shown_name(path)} exists", confirm=confirm)
    return CommandResult(_saved(conv, arg))


def _saved(conv: Conversation, arg: str) -> str:
    try:
        path = conv.save_markdown(Path(arg))
    except OSError as exc:
        raise UsageError(f"cannot write {arg}: {exc.strerror or exc}") from exc
    return f"saved the conversation to {path}"


def _spec(conv: Conversation, arg: str) -> CommandResult:
    engine = _engine(conv)
    if arg.lower() not in ("", "on", "off"):
        raise UsageError("/spec takes on or off")
    if arg.lower() == "on" and engine.drafter is None:
        raise UsageError("no drafter is loaded; /draft NAME loads one")
    if arg:
        engine.set_speculation(arg.lower() == "on")
    if engine.speculating:
        return CommandResult(f"speculating with {engine.drafter_name}")
    idle = f" ({engine.drafter_name} is loaded but idle)" if engine.drafter is not None else ""
    return CommandResult(f"plain decoding{idle}")


def _draft(conv: Conversation, arg: str) -> CommandResult:
    engine = _engine(conv)
    if not arg:
        raise UsageError("/draft needs a drafter: a model name or path, lookup, hybrid or none")
    engine.set_draft(arg)
    if engine.drafter is None:
        return CommandResult("no drafter: plain decoding")
    return CommandResult(f"speculating with {engine.drafter_name}")


def _stats(conv: Conversation, arg: str) -> CommandResult:
    _no_arg("stats", arg)
    lines = []
    if conv.last_stats is None:
        lines.append("no answer yet in this session")
    else:
        lines.append(f"last answer: {conv.last_stats.summary_line()}")
    stored = conv.store.stats(conv.session_id)
    if stored:
        total = totals(from_dict(s) for s in stored)
        lines.append(f"session: {len(stored)} answers, {answer_line(total)}")
    if conv.engine is not None:
        lines.append(f"target {conv.engine.target_name}; "
                     + (f"drafter {conv.engine.drafter_name}" if conv.engine.speculating else "plain decoding"))
    return CommandResult("\n".join(lines))


def _system(conv: Conversation, arg: str) -> CommandResult:
    if not arg:
        current = conv.system
        return CommandResult(f"system prompt: {current}" if current else "no system prompt (/system TEXT sets one)")
    if arg == "-":
        conv.set_system(None)
        return CommandResult("removed the system prompt")
    conv.set_system(arg)
    return CommandResult("set the system prompt")


def _copy(conv: Conversation, arg: str) -> CommandResult:
    _no_arg("copy", arg)
    block = conv.last_code_block()
    if block is not None:
        lines = block.count("\n") + (not block.endswith("\n"))
        return CommandResult(f"copied the last code block ({lines} lines)", clipboard=block)
    answer = conv.last_answer()
    if answer is None:
        raise UsageError("nothing to copy yet")
    return CommandResult("copied the last answer (it has no code block)", clipboard=answer)


def _help(conv: Conversation, arg: str) -> CommandResult:
    usages = {name: f"/{name} {ARGUMENTS.get(name, '')}".rstrip() for name in COMMANDS}
    width = max(len(u) for u in usages.values()) + 2
    return CommandResult("\n".join(f"{usages[name]:<{width}}{text}" for name, text in COMMANDS.items()))


_HANDLERS: dict[str, Callable[[Conversation, str], CommandResult]] = {
    "new": _new, "clear": _clear, "save": _save, "spec": _spec, "draft": _draft, "stats": _stats,
    "system": _system, "copy": _copy, "help": _help, **FILE_HANDLERS,
}
