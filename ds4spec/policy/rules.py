"""Trigger rules: per context family, a syntax event maps to a base draft length and a drafter choice.

Rule sets are TOML files, one per family (``triggers/`` ships python, javascript, rust, go, c, shell, data,
markdown and default). A file looks like::

    [family]
    name = "python"
    aliases = ["py", "python3"]          # fence tags and --language values that mean this family
    extensions = [".py", ".pyi"]        # file names that mean it
    lexer = "python"                    # the pygments lexer that finds comments, strings and keywords
    keywords = ["def", "class", "import"]   # keywords that start boilerplate

    [events]
    comment = { length = 8, drafter = "hybrid" }
    newline = { length = 4, drafter = "model" }

Users add families or override events of a built-in family with their own files (``--triggers PATH``, a
file or a directory, and ``triggers/`` in the user config directory); a user file for an existing family
replaces only the keys it names. Every problem is an error naming the file and line: the built-in rules
are never silently replaced.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ds4spec.errors import UsageError
from ds4spec.paths import config_dir, shipped_dir

BUILTIN_DIR = shipped_dir("triggers")
MAX_LENGTH = 64

# The syntax events, in the order detection tries them. Each says where the text being written stands.
EVENTS: dict[str, str] = {
    "fence_open": "just after a code fence opening line (```lang)",
    "docstring": "inside a docstring",
    "comment": "inside a comment (#, //, /* ... */, <!-- -->)",
    "string": "inside a string literal",
    "bullet": "just after a list bullet (-, *, 1.)",
    "blank_line": "at the start of a line after a blank one (a new paragraph of code, or the end of an answer)",
    "newline": "at the start of a new line, after its indentation",
    "block_close": "just after a block closes (}, ), ], end)",
    "open_bracket": "just after an opening bracket",
    "assignment": "just after an assignment (=, :=, +=, ...)",
    "operator": "just after another operator",
    "keyword": "just after a keyword that starts boilerplate (import, def, return, fn, func, ...)",
    "code": "anywhere else in code",
    "sentence": "prose, at the start of a sentence",
    "prose": "prose, inside a sentence",
}
Choice = Literal["lookup", "model", "hybrid"]
CHOICES: tuple[Choice, ...] = ("lookup", "model", "hybrid")
_FAMILY_KEYS = {"name", "aliases", "extensions", "lexer", "keywords", "prose"}
_RULE_KEYS = {"length", "drafter"}


@dataclass(frozen=True, slots=True)
class Rule:
    length: int  # the prior draft length in target tokens; 0: do not draft (adaptation may still probe)
    drafter: Choice


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    aliases: tuple[str, ...] = ()
    extensions: tuple[str, ...] = ()
    lexer: str = "text"
    keywords: frozenset[str] = frozenset()
    prose: bool = False  # markdown-like: prose with fenced code blocks
    events: Mapping[str, Rule] = field(default_factory=dict)
    sources: tuple[str, ...] = ()  # the files it was read from, for messages

    def rule(self, event: str) -> Rule:
        """The event's rule; an event the family does not name falls back to its code or prose rule."""
        fallback = "prose" if event in ("sentence", "prose") else "code"
        return self.events.get(event) or self.events.get(fallback) or _NO_RULE

_NO_RULE = Rule(0, "hybrid")


class TriggerRuleError(UsageError):
    """A rule file that cannot be used: its message names the file, the line and the problem."""


def _line_of(text: str, key: str, section: str | None = None) -> int | None:
    """The 1-based line where ``key`` is set (within ``[section]`` when given), for error messages."""
    in_section = section is None
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("["):
            header = stripped.split("#")[0].strip("[] ")
            if header == (f"{section}.{key}" if section else key):
                return n  # a table header: [unknown] or [events.comment]
            in_section = section is None or header == section
            continue
        if in_section and re.match(rf'"?{re.escape(key)}"?\s*=', stripped):
            return n
    return None


class _FileReader:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TriggerRuleError(f"trigger rules {path}: cannot be read ({exc})") from exc
        try:
            self.data = tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as exc:
            raise TriggerRuleError(f"trigger rules {path}: {exc}") from exc

    def fail(self, problem: str, key: str | None = None, section: str | None = None) -> TriggerRuleError:
        line = _line_of(self.text, key, section) if key else None
        where = f"{self.path}:{line}" if line else str(self.path)
        return TriggerRuleError(f"trigger rules {where}: {problem}")

    def strings(self, table: dict[str, Any], key: str) -> tuple[str, ...]:
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f"family.{key} must be a list of strings", key, "family")
        return tuple(value)

    def family(self, base: Family | None) -> Family:
        unknown = set(self.data) - {"family", "events"}
        if unknown:
            name = sorted(unknown)[0]
            raise self.fail(f"unknown table {name!r} (expected [family] and [events])", name)
        head = self.data.get("family")
        if not isinstance(head, dict) or not isinstance(head.get("name"), str) or not head["name"]:
            raise self.fail("a [family] table with a name is required", "name", "family")
        for key in head:
            if key not in _FAMILY_KEYS:
                raise self.fail(f"unknown key family.{key} (known: {', '.join(sorted(_FAMILY_KEYS))})",
                                key, "family")
        family = base or Family(head["name"])
        updates: dict[str, Any] = {"sources": (*family.sources, str(self.path))}
        for key in ("aliases", "extensions"):
            if key in head:
                updates[key] = self.strings(head, key)
        if "keywords" in head:
            updates["keywords"] = frozenset(self.strings(head, "keywords"))
        if "lexer" in head:
            updates["lexer"] = self._lexer(head["lexer"])
        if "prose" in head:
            if not isinstance(head["prose"], bool):
                raise self.fail("family.prose must be true or false", "prose", "family")
            updates["prose"] = head["prose"]
        updates["events"] = {**family.events, **self._events()}
        return replace(family, **updates)

    def _lexer(self, name: object) -> str:
        from pygments.lexers import get_lexer_by_name
        from pygments.util import ClassNotFound

        if not isinstance(name, str):
            raise self.fail("family.lexer must be a pygments lexer name", "lexer", "family")
        try:
            get_lexer_by_name(name)
        except ClassNotFound:
            raise self.fail(f"family.lexer {name!r} is not a pygments lexer", "lexer", "family") from None
        return name

    def _events(self) -> dict[str, Rule]:
        table = self.data.get("events", {})
        if not isinstance(table, dict):
            raise self.fail("[events] must be a table", "events")
        rules: dict[str, Rule] = {}
        for event, raw in table.items():
            if event not in EVENTS:
                raise self.fail(f"unknown event {event!r} (known: {', '.join(EVENTS)})", event, "events")
            if not isinstance(raw, dict):
                raise self.fail(f"event {event} must be a table like {{ length = 4, drafter = \"hybrid\" }}",
                                event, "events")
            extra = set(raw) - _RULE_KEYS
            if extra:
                raise self.fail(f"unknown key {sorted(extra)[0]!r} in event {event} (known: length, drafter)",
                                event, "events")
            length, drafter = raw.get("length"), raw.get("drafter", "hybrid")
            if not isinstance(length, int) or isinstance(length, bool) or not 0 <= length <= MAX_LENGTH:
                raise self.fail(f"event {event}: length must be an integer from 0 to {MAX_LENGTH}", event, "events")
            if drafter not in CHOICES:
                raise self.fail(f"event {event}: drafter must be one of {', '.join(CHOICES)}", event, "events")
            rules[event] = Rule(length, drafter)
        return rules


class RuleBook:
    """Every family, found by name, alias, fence tag or file extension."""

    def __init__(self, families: Mapping[str, Family]) -> None:
        if "default" not in families:
            raise TriggerRuleError("trigger rules: no 'default' family (triggers/default.toml is missing)")
        self.families = dict(families)
        self._by_alias = {a.lower(): f for f in families.values() for a in (f.name, *f.aliases)}
        self._by_ext = {e.lower(): f for f in families.values() for e in f.extensions}

    def family(self, language: str | None) -> Family:
        """The family for a language name, fence tag or file name; ``default`` when none matches."""
        if not language:
            return self.families["default"]
        key = language.strip().lower()
        if key in self._by_alias:
            return self._by_alias[key]
        suffix = Path(key).suffix or (f".{key}" if "." not in key else "")
        return self._by_ext.get(suffix) or self.families["default"]

    def knows(self, language: str) -> bool:
        key = language.strip().lower()
        return key in self._by_alias or (Path(key).suffix or f".{key}") in self._by_ext


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(path.glob("*.toml"))
    if path.is_file():
        return [path]
    raise TriggerRuleError(f"trigger rules {path}: no such file or directory")


def load_rulebook(extra: Iterable[Path] = (), *, user_dir: Path | None = None) -> RuleBook:
    """The built-in families, then the user config directory's, then ``extra`` (``--triggers``), in order."""
    families: dict[str, Family] = {}
    user = user_dir if user_dir is not None else config_dir() / "triggers"
    paths = [*_files(BUILTIN_DIR), *(_files(user) if user.is_dir() else []), *(p for e in extra for p in _files(e))]
    for path in paths:
        reader = _FileReader(path)
        head = reader.data.get("family")
        name = head.get("name") if isinstance(head, dict) else None
        family = reader.family(families.get(name) if isinstance(name, str) else None)
        families[family.name] = family
    return RuleBook(families)
