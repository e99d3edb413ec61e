"""Trigger rule files: the built-in families, user files that add or override, every error named by file and line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ds4spec.policy.rules import (
    BUILTIN_DIR,
    EVENTS,
    MAX_LENGTH,
    Family,
    Rule,
    RuleBook,
    TriggerRuleError,
    load_rulebook,
)

FAMILIES = ["c", "data", "default", "go", "javascript", "markdown", "python", "rust", "shell"]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _book(tmp_path: Path, *extra: Path) -> RuleBook:
    """The built-in rules plus ``extra``, with an empty user directory (the user's real one is never read)."""
    return load_rulebook(extra, user_dir=tmp_path / "no-user-dir")


# -- the built-in families --------------------------------------------------------------------------------


def test_built_in_families_cover_the_languages_a_coding_assistant_meets(tmp_path: Path) -> None:
    book = _book(tmp_path)
    assert sorted(book.families) == FAMILIES
    for name in FAMILIES:
        family = book.families[name]
        assert family.sources == (str(BUILTIN_DIR / f"{name}.toml"),)
        assert set(family.events) <= set(EVENTS)
        assert all(0 <= rule.length <= MAX_LENGTH for rule in family.events.values())
    assert book.families["markdown"].prose and not book.families["python"].prose


@pytest.mark.parametrize(
    ("language", "family"),
    [
        ("python", "python"), ("py", "python"), ("Python3", "python"), ("tools/build.py", "python"),
        ("ts", "javascript"), ("tsx", "javascript"), ("src/app.mjs", "javascript"), ("typescript", "javascript"),
        ("rs", "rust"), ("src/main.rs", "rust"), ("golang", "go"), ("main.go", "go"),
        ("c++", "c"), ("cpp", "c"), ("include/vec.hpp", "c"), ("bash", "shell"), ("install.sh", "shell"),
        ("json", "data"), ("yml", "data"), ("pyproject.toml", "data"), ("md", "markdown"), ("README.md", "markdown"),
        ("chat", "markdown"), ("cobol", "default"), ("", "default"), (None, "default"), ("notes.unknown", "default"),
    ],
)
def test_a_language_name_fence_tag_or_file_name_finds_its_family(
    tmp_path: Path, language: str | None, family: str
) -> None:
    assert _book(tmp_path).family(language).name == family


def test_an_event_a_family_does_not_list_falls_back_to_its_code_or_prose_rule() -> None:
    family = Family("f", events={"code": Rule(3, "model"), "prose": Rule(1, "lookup"), "comment": Rule(9, "hybrid")})
    assert family.rule("comment") == Rule(9, "hybrid")
    assert family.rule("keyword") == Rule(3, "model")
    assert family.rule("sentence") == Rule(1, "lookup")
    assert Family("empty").rule("newline") == Rule(0, "hybrid")  # nothing listed: do not draft


def test_a_rule_book_without_the_default_family_is_refused() -> None:
    with pytest.raises(TriggerRuleError, match="default"):
        RuleBook({"python": Family("python")})


# -- user files -------------------------------------------------------------------------------------------


def test_a_user_file_overriding_one_event_keeps_the_familys_other_events(tmp_path: Path) -> None:
    builtin = _book(tmp_path).families["python"]
    user = _write(tmp_path / "mine.toml", '[family]\nname = "python"\n\n[events]\n'
                  'comment = { length = 12, drafter = "model" }\n')
    python = _book(tmp_path, user).families["python"]
    assert python.rule("comment") == Rule(12, "model")
    assert {e: r for e, r in python.events.items() if e != "comment"} == {
        e: r for e, r in builtin.events.items() if e != "comment"}
    assert (python.aliases, python.lexer, python.keywords) == (builtin.aliases, builtin.lexer, builtin.keywords)
    assert python.sources == (*builtin.sources, str(user))


def test_a_user_file_with_a_new_name_adds_a_family_found_by_alias_and_extension(tmp_path: Path) -> None:
    user = _write(tmp_path / "lua.toml", '[family]\nname = "lua"\naliases = ["luajit"]\nextensions = [".lua"]\n'
                  'lexer = "lua"\nkeywords = ["local", "function"]\n\n[events]\nkeyword = { length = 5 }\n')
    book = _book(tmp_path, user)
    lua = book.family("luajit")
    assert lua is book.family("init.lua") and lua.name == "lua"
    assert lua.rule("keyword") == Rule(5, "hybrid")  # the drafter defaults to hybrid
    assert lua.keywords == frozenset({"local", "function"})
    assert set(book.families) == {*FAMILIES, "lua"}


def test_a_triggers_directory_is_read_file_by_file_in_name_order(tmp_path: Path) -> None:
    folder = tmp_path / "rules"
    _write(folder / "a.toml", '[family]\nname = "python"\n[events]\ncomment = { length = 10 }\n')
    _write(folder / "b.toml", '[family]\nname = "python"\n[events]\ncomment = { length = 20 }\n')
    _write(folder / "notes.txt", "not a rule file, and not read\n")
    assert _book(tmp_path, folder).families["python"].rule("comment").length == 20


def test_the_user_config_directory_is_read_and_triggers_files_come_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DS4SPEC_HOME", str(tmp_path / "home"))
    _write(tmp_path / "home" / "config" / "triggers" / "python.toml",
           '[family]\nname = "python"\n[events]\ncomment = { length = 10 }\nnewline = { length = 11 }\n')
    python = load_rulebook().families["python"]
    assert (python.rule("comment").length, python.rule("newline").length) == (10, 11)
    extra = _write(tmp_path / "extra.toml", '[family]\nname = "python"\n[events]\ncomment = { length = 30 }\n')
    python = load_rulebook([extra]).families["python"]
    assert (python.rule("comment").length, python.rule("newline").length) == (30, 11)


def test_a_broken_file_in_the_user_config_directory_is_an_error_not_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DS4SPEC_HOME", str(tmp_path / "home"))
    broken = _write(tmp_path / "home" / "config" / "triggers" / "python.toml",
                    '[family]\nname = "python"\n[events]\ncomment = { length = 100 }\n')
    with pytest.raises(TriggerRuleError, match=f"{broken}:4: event comment: length"):
        load_rulebook()


@pytest.mark.parametrize("missing", ["missing.toml", "missing-dir"])
def test_a_triggers_path_that_does_not_exist_is_an_error(tmp_path: Path, missing: str) -> None:
    with pytest.raises(TriggerRuleError, match=f"{tmp_path / missing}: no such file or directory"):
        _book(tmp_path, tmp_path / missing)


# -- every error names the file and the line ------------------------------------------------------------

HEAD = '[family]\nname = "mine"\n'
EVENTS_HEAD = HEAD + "\n[events]\nnewline = { length = 4 }\n"
ERRORS = {
    # name: (file text, line named, words of the message)
    "unknown_table_is_rejected": (HEAD + "\n[event]\nnewline = { length = 4 }\n", 4, "unknown table 'event'"),
    "unknown_family_key_is_rejected": (HEAD + 'lexers = "python"\n', 3, "unknown key family.lexers"),
    "unknown_event_is_rejected": (EVENTS_HEAD + "semicolon = { length = 2 }\n", 6, "unknown event 'semicolon'"),
    "unknown_rule_key_is_rejected": (HEAD + '[events]\nnewline = { length = 4, source = "model" }\n', 4,
                                     "unknown key 'source' in event newline"),
    "negative_length_is_rejected": (EVENTS_HEAD + "comment = { length = -1 }\n", 6, "length must be an integer"),
    "length_over_64_is_rejected": (EVENTS_HEAD + "comment = { length = 65 }\n", 6, "from 0 to 64"),
    "float_length_is_rejected": (EVENTS_HEAD + "comment = { length = 4.0 }\n", 6, "length must be an integer"),
    "string_length_is_rejected": (EVENTS_HEAD + 'comment = { length = "4" }\n', 6, "length must be an integer"),
    "bool_length_is_rejected": (EVENTS_HEAD + "comment = { length = true }\n", 6, "length must be an integer"),
    "missing_length_is_rejected": (EVENTS_HEAD + 'comment = { drafter = "model" }\n', 6, "length must be an integer"),
    "bad_drafter_choice_is_rejected": (EVENTS_HEAD + 'comment = { length = 4, drafter = "torch" }\n', 6,
                                       "drafter must be one of lookup, model, hybrid"),
    "event_that_is_not_a_table_is_rejected": (EVENTS_HEAD + "comment = 4\n", 6, "event comment must be a table"),
    "event_as_a_sub_table_with_a_bad_value_is_rejected": (EVENTS_HEAD + "\n[events.comment]\nlength = 99\n", 7,
                                                          "event comment: length"),
    "bad_lexer_name_is_rejected": (HEAD + 'lexer = "pythonn"\n', 3, "'pythonn' is not a pygments lexer"),
    "lexer_that_is_not_a_string_is_rejected": (HEAD + "lexer = 3\n", 3, "family.lexer must be a pygments lexer"),
    "aliases_that_are_not_a_list_are_rejected": (HEAD + 'aliases = "py"\n', 3, "family.aliases must be a list"),
    "keywords_that_are_not_strings_are_rejected": (HEAD + "keywords = [1, 2]\n", 3, "family.keywords must be a list"),
    "prose_that_is_not_a_boolean_is_rejected": (HEAD + 'prose = "yes"\n', 3, "family.prose must be true or false"),
    "empty_family_name_is_rejected": ('[family]\nname = ""\n', 2, "a [family] table with a name is required"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_error_names_file_and_line(tmp_path: Path, case: str) -> None:
    text, line, words = ERRORS[case]
    path = _write(tmp_path / f"{case}.toml", text)
    with pytest.raises(TriggerRuleError) as err:
        _book(tmp_path, path)
    message = str(err.value)
    assert message.startswith(f"trigger rules {path}:{line}: "), message
    assert words in message and "\n" not in message


@pytest.mark.parametrize(
    "text", ['[family]\naliases = ["x"]\n', '[events]\nnewline = { length = 4 }\n', 'family = "python"\n'],
    ids=["no_name", "no_family_table", "family_not_a_table"],
)
def test_a_file_without_a_family_name_is_rejected_naming_the_file(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path / "nameless.toml", text)
    with pytest.raises(TriggerRuleError, match=f"trigger rules {path}(:\\d+)?: a \\[family\\] table with a name"):
        _book(tmp_path, path)


def test_malformed_toml_is_rejected_with_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "malformed.toml", EVENTS_HEAD + 'comment = { length = 4, drafter = "model"\n')
    with pytest.raises(TriggerRuleError) as err:
        _book(tmp_path, path)
    message = str(err.value)
    assert message.startswith(f"trigger rules {path}: ") and "line 6" in message and "\n" not in message


def test_a_file_that_is_not_utf8_is_rejected_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'[family]\nname = "caf\xe9"\n')
    with pytest.raises(TriggerRuleError, match=f"trigger rules {path}: cannot be read"):
        _book(tmp_path, path)


def test_a_broken_override_leaves_no_half_loaded_family_behind(tmp_path: Path) -> None:
    """An error is raised, never swallowed: there is no rule book in which the built-in family was replaced."""
    broken = _write(tmp_path / "python.toml", '[family]\nname = "python"\n[events]\ncomment = { length = -3 }\n')
    with pytest.raises(TriggerRuleError):
        _book(tmp_path, broken)
    assert _book(tmp_path).families["python"].rule("comment").length == 6  # the shipped rule, read afresh


# -- the command line -------------------------------------------------------------------------------------


def _complete(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ds4spec", "complete", *args], input=b"def f(x):\n",
                          capture_output=True, timeout=120)


def test_complete_with_a_broken_triggers_file_exits_2_with_one_line_naming_file_and_line(
    tmp_path: Path, tiny_bpe_gguf: Path
) -> None:
    broken = _write(tmp_path / "broken.toml", EVENTS_HEAD + "comment = { length = 65 }\n")
    proc = _complete("--triggers", str(broken), "--target", str(tiny_bpe_gguf))
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2 and proc.stdout == b""
    assert lines == [f"ds4spec: error: trigger rules {broken}:6: event comment: length must be an integer from 0 to 64"]


def test_complete_reads_the_rules_before_loading_any_model(tmp_path: Path) -> None:
    """The target does not even exist: the rule file's error comes first, so no model was touched."""
    broken = _write(tmp_path / "broken.toml", "[family\n")
    proc = _complete("--triggers", str(broken), "--target", str(tmp_path / "absent.gguf"))
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1
    assert lines[0].startswith(f"ds4spec: error: trigger rules {broken}: ") and "line 1" in lines[0]
    missing = _complete("--triggers", str(tmp_path / "nowhere"), "--target", str(tmp_path / "absent.gguf"))
    assert missing.returncode == 2
    assert missing.stderr.decode().strip() == (
        f"ds4spec: error: trigger rules {tmp_path / 'nowhere'}: no such file or directory")
