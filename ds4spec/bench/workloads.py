"""The benchmark workloads: code generation (HumanEval), edits, files and prose, as prompts for target and drafter.

The inputs ship in ``ds4spec/bench/data`` (a copy of the project's shared benchmark inputs; HumanEval is
MIT-licensed, see ``LICENSE.humaneval`` there). Code generation is plain completion of the function; edits
and prose are chat turns, rendered with the target's chat template (and with the drafter's own, by it).
Files are the edits asked about a file in the conversation, put in front of the question as ``/add`` puts it
(``ds4spec.engine.context_files``), which is the path the chat's and the REPL's edits take.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ds4spec.backend.prompt import ChatMessage, chat_tokens, completion_tokens
from ds4spec.backend.target import LlamaTarget
from ds4spec.core.drafting import DraftContext
from ds4spec.engine.context_files import ContextFile, with_files
from ds4spec.errors import UsageError

DATA_DIR = Path(__file__).resolve().parent / "data"
WORKLOADS = ("humaneval", "edits", "files", "prose")
_INPUTS = {"files": "edits"}  # the files workload asks the edits' questions about files
# A prompts file's keys: a typo is an error, not ignored.
_OWN_KEYS = frozenset({"prompt", "text", "id", "stop", "language"})
_RENAMED = re.compile(r"Rename the function `(\w+)`")
# The usual HumanEval stops: the function ends where the next top-level statement begins.
CODE_STOPS = ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#")


@dataclass(frozen=True, slots=True)
class Task:
    workload: str
    task_id: str
    text: str | None = None  # completion mode
    messages: tuple[ChatMessage, ...] | None = None  # chat mode
    stop: tuple[str, ...] = ()
    language: str | None = None  # of a text to continue, for trigger rules (None: as the settings say)

    def prompt_tokens(self, target: LlamaTarget) -> list[int]:
        if self.messages is not None:
            return chat_tokens(target.tokenizer, target.chat_template, self.messages)
        assert self.text is not None
        return completion_tokens(target.tokenizer, self.text)

    def draft_context(self) -> DraftContext:
        if self.messages is not None:
            return DraftContext(messages=self.messages)
        assert self.text is not None
        return DraftContext(text=self.text.encode("utf-8"))


def load_tasks(workload: str, limit: int | None = None, data_dir: Path = DATA_DIR, *, skip: int = 0) -> list[Task]:
    """The workload's prompts in their file's order: ``limit`` of them (all when None) after the first ``skip``."""
    if workload not in WORKLOADS:
        raise UsageError(f"unknown workload {workload!r} (known: {', '.join(WORKLOADS)})")
    path = data_dir / f"{_INPUTS.get(workload, workload)}.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return _selected([_task(workload, row) for row in rows], workload, limit, skip)


def load_prompt_file(path: Path, limit: int | None = None, *, skip: int = 0) -> list[Task]:
    """A user's own prompts as a workload named after the file: one JSON object a line, ``{"prompt": ...}`` a chat
    turn (rendered with the target's chat template) or ``{"text": ...}`` text to continue, with an optional ``"id"``,
    ``"stop"`` (texts that end the answer) and, for a text, ``"language"`` (a name, fence tag or file name: the
    trigger rules it is written in, as ``complete --language`` picks them)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read prompts file {path}: {getattr(e, 'strerror', None) or e}") from None
    workload = path.stem
    tasks = [_own_task(workload, f"{path}, line {n}", line, n)
             for n, line in enumerate(lines, start=1) if line.strip()]
    if not tasks:
        raise UsageError(f"prompts file {path} has no prompts: one JSON object a line")
    if (repeated := first_repeat([task.task_id for task in tasks])) is not None:
        raise UsageError(f"prompts file {path}: the id {repeated!r} is used twice")
    return _selected(tasks, workload, limit, skip)


def first_repeat(names: list[str]) -> str | None:
    """The first name that ``names`` holds twice, or None."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


def _selected(tasks: list[Task], workload: str, limit: int | None, skip: int) -> list[Task]:
    """``limit`` of ``tasks`` (all when None) after the first ``skip``, or a one-line error where that is none."""
    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be at least 1, got {limit}")
    if skip < 0:
        raise UsageError(f"--skip must be 0 or more, got {skip}")
    if skip >= len(tasks):
        raise UsageError(f"--skip {skip} leaves no {workload} prompt: the workload has {len(tasks)}")
    return tasks[skip:][:limit] if limit is not None else tasks[skip:]


def _own_task(workload: str, where: str, line: str, number: int) -> Task:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        raise UsageError(f"{where}: not JSON ({e.msg})") from None
    if not isinstance(row, dict):
        raise UsageError(f"{where}: expected a JSON object with \"prompt\" or \"text\"")
    if unknown := sorted(set(row) - _OWN_KEYS):
        raise UsageError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_OWN_KEYS))})")
    given = [key for key in ("prompt", "text") if key in row]
    if len(given) != 1:
        raise UsageError(f"{where}: give exactly one of \"prompt\" (a chat turn) and \"text\" (text to continue)")
    body, task_id, stop = row[given[0]], row.get("id", f"{workload}/{number}"), row.get("stop", [])
    if not isinstance(body, str) or not body.strip():
        raise UsageError(f"{where}: \"{given[0]}\" must be a non-empty string")
    if not isinstance(task_id, str) or not task_id:
        raise UsageError(f"{where}: \"id\" must be a non-empty string")
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise UsageError(f"{where}: \"stop\" must be a list of non-empty strings")
    language = row.get("language")
    if language is not None and (given[0] != "text" or not isinstance(language, str) or not language.strip()):
        raise UsageError(f"{where}: \"language\" must be a non-empty string, given with \"text\" (a chat answer is "
                         "markdown)")
    if given[0] == "text":
        return Task(workload, task_id, text=body, stop=tuple(stop), language=language)
    return Task(workload, task_id, messages=(ChatMessage("user", body),), stop=tuple(stop))


def _task(workload: str, row: dict[str, str]) -> Task:
    if workload == "humaneval":
        return Task(workload, row["task_id"], text=row["prompt"], stop=CODE_STOPS, language="python")
    if workload == "edits":
        fence = row.get("language", "python")
        ask = f"{row['instruction']}\n\n```{fence}\n{row['code']}```"
        return Task(workload, row["task_id"], messages=(ChatMessage("user", ask),))
    if workload == "files":
        named = _RENAMED.match(row["instruction"])
        name = f"{named[1] if named else 'module'}.py"
        ask = with_files([ContextFile(name, row["code"])], row["instruction"].replace("the code below", name))
        return Task(workload, row["task_id"].replace("Edit", "File"), messages=(ChatMessage("user", ask),))
    return Task(workload, row["task_id"], messages=(ChatMessage("user", row["prompt"]),))
