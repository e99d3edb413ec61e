"""Applying a unified diff as a model writes one: hunks placed by their lines, not by their numbers.

The diff libraries (unidiff, whatthepatch, patch-ng) trust the ``@@ -12,7 +12,8 @@`` headers: a hunk whose
counts are off is refused, one whose start is off is applied nowhere. A model's diffs get the numbers wrong
often and the lines rarely, so a hunk here is put where its context and removed lines are in the file (the
place nearest the line its header names, when several match), and a header without numbers (``@@``) is
fine. A hunk whose lines are nowhere in the file is refused with the first line that was not found.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from ds4spec.errors import UsageError

_START = re.compile(r"^@@ -(\d+)")


class HunkError(UsageError):
    """The diff does not apply to the file as it is."""


@dataclass
class Hunk:
    start: int | None  # the old line number its header names (1-based), when it names one
    old: list[str] = field(default_factory=list)  # context and removed lines, in order
    new: list[str] = field(default_factory=list)  # context and added lines, in order


def is_diff(code: str) -> bool:
    lines = code.splitlines()
    has_headers = any(a.startswith("--- ") and b.startswith("+++ ") for a, b in itertools.pairwise(lines))
    return has_headers or any(line.startswith("@@") for line in lines)


def diff_target(code: str) -> str | None:
    """The path the first ``+++`` header names (``b/`` and a timestamp taken off), or None."""
    for line in code.splitlines():
        if line.startswith("+++ "):
            path = line[4:].split("\t")[0].strip()
            if path == "/dev/null":
                return None
            return path[2:] if path.startswith(("a/", "b/")) else path
    return None


def parse_hunks(code: str) -> list[Hunk]:
    """The hunks of the first file in ``code``; a later file's headers end it."""
    hunks: list[Hunk] = []
    lines = code.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            if hunks:
                break
            continue
        if line.startswith("@@"):
            start = _START.match(line)
            hunks.append(Hunk(int(start[1]) if start else None))
        elif hunks and not line.startswith(("+++ ", "\\")):
            _add_line(hunks[-1], line)
    return [h for h in hunks if h.old or h.new]


def _add_line(hunk: Hunk, line: str) -> None:
    mark, rest = line[:1], line[1:]
    if mark == "-":
        hunk.old.append(rest)
    elif mark == "+":
        hunk.new.append(rest)
    else:  # a context line; models often drop the space in front of a blank one
        text = rest if mark == " " else line
        hunk.old.append(text)
        hunk.new.append(text)


def apply_hunks(text: str, hunks: list[Hunk], name: str) -> str:
    """``text`` with every hunk applied in order; ``HunkError`` names the first one that does not apply."""
    if not hunks:
        raise HunkError(f"the diff for {name} has no hunks")
    ends_with_newline = text.endswith("\n") or not text
    lines = text.splitlines()
    cursor = shift = 0  # hunks apply in order; shift: lines added so far, to correct the headers' numbers
    for number, hunk in enumerate(hunks, 1):
        at = _place(lines, hunk, cursor, None if hunk.start is None else hunk.start - 1 + shift)
        if at is None:
            missing = next((line for line in hunk.old if line not in lines[cursor:]), hunk.old[0] if hunk.old else "")
            where = f": {missing.strip()!r} is not in it" if missing.strip() else ""
            raise HunkError(f"hunk {number} of the diff does not apply to {name}{where}")
        lines[at:at + len(hunk.old)] = hunk.new
        cursor = at + len(hunk.new)
        shift += len(hunk.new) - len(hunk.old)
    return "\n".join(lines) + ("\n" if ends_with_newline and lines else "")


def _place(lines: list[str], hunk: Hunk, cursor: int, claimed: int | None) -> int | None:
    """Where the hunk's old lines are, at or after ``cursor``: the match nearest ``claimed``. Trailing spaces
    are ignored when the exact lines are nowhere."""
    if not hunk.old:  # a pure insertion has nothing to match: only its header says where
        return None if claimed is None else min(max(claimed + 1, cursor), len(lines))
    for key in (lambda s: s, lambda s: s.rstrip()):
        old = [key(s) for s in hunk.old]
        keyed = [key(s) for s in lines]
        found = [i for i in range(cursor, len(lines) - len(old) + 1) if keyed[i:i + len(old)] == old]
        if found:
            return min(found, key=lambda i: abs(i - claimed)) if claimed is not None else found[0]
    return None
