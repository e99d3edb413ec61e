"""`ds4spec bench --prompts FILE`: a user's own prompts as a workload named after the file, chat turns or text to
continue, measured as the shipped workloads are; a bad file is a one-line error, naming the line, before any model
loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ds4spec.bench.modes import task_language
from ds4spec.bench.workloads import load_prompt_file, load_tasks
from ds4spec.errors import UsageError


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ds4spec", "bench", "--max-tokens", "8", *args],
                          capture_output=True, timeout=300, env=dict(os.environ), text=True)


def prompts_file(folder: Path, rows: list[object], name: str = "mine.jsonl") -> Path:
    path = folder / name
    path.write_text("".join(f"{json.dumps(row)}\n" for row in rows), encoding="utf-8")
    return path


def test_a_prompt_is_a_chat_turn_and_a_text_is_continued(tmp_path: Path) -> None:
    path = prompts_file(tmp_path, [{"prompt": "Add type hints to `f`."},
                                   {"text": "def f(x):\n", "id": "f-body", "stop": ["\ndef "]}])
    chat, text = load_prompt_file(path)
    assert (chat.workload, chat.task_id, chat.text) == ("mine", "mine/1", None)
    assert chat.messages is not None and chat.messages[0].content == "Add type hints to `f`."
    assert (text.workload, text.task_id, text.text, text.messages, text.stop) == (
        "mine", "f-body", "def f(x):\n", None, ("\ndef ",))


def test_a_text_may_name_the_language_it_is_written_in(tmp_path: Path) -> None:
    path = prompts_file(tmp_path, [{"text": "fn main() {\n", "language": "rust"}, {"text": "x = 1\n"}])
    assert [task.language for task in load_prompt_file(path)] == ["rust", None]


@pytest.mark.parametrize(("workload", "line", "flag", "language"), [
    ("humaneval", None, None, "python"),
    ("humaneval", None, "rust", "python"),
    ("mine", {"text": "fn f() {}\n", "language": "rust"}, "javascript", "rust"),
    ("mine", {"text": "function f() {}\n"}, "javascript", "javascript"),
    ("mine", {"text": "x = 1\n"}, None, None),
    ("mine", {"prompt": "Fix the bug."}, "rust", "markdown"),
], ids=["humaneval-is-python", "humaneval-stays-python-whatever-the-flag", "a-text-s-own-language-wins",
        "a-text-without-one-takes-the-flag-s", "a-text-without-either-takes-the-default-rules",
        "a-chat-answer-is-markdown"])
def test_the_bench_picks_trigger_rules_as_complete_would(tmp_path: Path, workload: str, line: dict[str, str] | None,
                                                         flag: str | None, language: str | None) -> None:
    """A text prompt is in the language it names (HumanEval's Python, a prompts file's ``"language"``), else in
    ``--language``'s, else the default rules', as ``ds4spec complete`` picks them; a chat answer is markdown."""
    task = load_tasks(workload, 1)[0] if line is None else load_prompt_file(prompts_file(tmp_path, [line]))[0]
    assert task_language(task, flag) == language


def test_limit_and_skip_select_from_a_prompts_file_as_from_a_workload(tmp_path: Path) -> None:
    path = prompts_file(tmp_path, [{"prompt": f"question {i}"} for i in range(5)])
    assert [t.task_id for t in load_prompt_file(path, 2, skip=1)] == ["mine/2", "mine/3"]


@pytest.mark.parametrize(("limit", "skip", "message"), [
    (0, 0, "--limit must be at least 1, got 0"),
    (2, -1, "--skip must be 0 or more, got -1"),
    (2, 5, "--skip 5 leaves no mine prompt: the workload has 5"),
], ids=["no-prompts", "negative-skip", "skip-past-the-end"])
def test_a_selection_from_a_prompts_file_that_leaves_no_prompt_is_refused(tmp_path: Path, limit: int, skip: int,
                                                                         message: str) -> None:
    path = prompts_file(tmp_path, [{"prompt": f"question {i}"} for i in range(5)])
    with pytest.raises(UsageError, match=message):
        load_prompt_file(path, limit, skip=skip)
    proc = bench("--target", str(tmp_path / "absent.gguf"), "--prompts", str(path), "--limit", str(limit),
                 "--skip", str(skip))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"ds4spec: error: {message}"


@pytest.mark.parametrize(("lines", "message"), [
    (["{not json"], r"line 1: not JSON \(Expecting property name enclosed in double quotes\)"),
    (['["a list"]'], 'line 1: expected a JSON object with "prompt" or "text"'),
    (['{"promt": "typo"}'], "line 1: unknown key 'promt' \\(known: id, language, prompt, stop, text\\)"),
    (['{"prompt": "a", "text": "b"}'], 'line 1: give exactly one of "prompt"'),
    (['{"id": "x"}'], 'line 1: give exactly one of "prompt"'),
    (['{"prompt": "  "}'], 'line 1: "prompt" must be a non-empty string'),
    (['{"text": 3}'], 'line 1: "text" must be a non-empty string'),
    (['{"prompt": "a", "id": 7}'], 'line 1: "id" must be a non-empty string'),
    (['{"prompt": "a", "stop": "end"}'], 'line 1: "stop" must be a list of non-empty strings'),
    (['{"prompt": "a"}', "", '{"prompt": "b", "stop": [""]}'], 'line 3: "stop" must be a list'),
    (['{"prompt": "a", "id": "x"}', '{"prompt": "b", "id": "x"}'], "the id 'x' is used twice"),
    (['{"text": "a", "language": ""}'], 'line 1: "language" must be a non-empty string, given with "text"'),
    (['{"prompt": "a", "language": "rust"}'], 'line 1: "language" must be .* given with "text" \\(a chat answer is'),
    (["", "  "], "has no prompts: one JSON object a line"),
], ids=["not-json", "not-an-object", "unknown-key", "prompt-and-text", "neither", "blank-prompt", "text-not-a-string",
        "id-not-a-string", "stop-not-a-list", "empty-stop-on-line-3", "repeated-id", "blank-language",
        "language-of-a-chat-turn", "empty-file"])
def test_a_bad_prompts_file_is_refused_naming_the_line(tmp_path: Path, lines: list[str], message: str) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(UsageError, match=message):
        load_prompt_file(path)


def test_an_unreadable_prompts_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"cannot read prompts file .*absent\.jsonl: No such file or directory"):
        load_prompt_file(tmp_path / "absent.jsonl")
    (tmp_path / "latin1.jsonl").write_bytes(b'{"prompt": "caf\xe9"}\n')
    with pytest.raises(UsageError, match=r"cannot read prompts file .*latin1\.jsonl: 'utf-8' codec"):
        load_prompt_file(tmp_path / "latin1.jsonl")


def test_the_bench_runs_a_prompts_file_as_a_workload_of_its_own(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    path = prompts_file(tmp_path, [{"prompt": "Repeat: the cat sat on the mat, the cat sat on the mat."},
                                   {"text": "one two three one two three one two", "id": "counting"}])
    out = tmp_path / "bench.json"
    proc = bench("--target", str(tiny_models["bpe"]), "--mode", "lookup", "--prompts", str(path), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["settings"]["workloads"] == ["mine"]
    assert report["settings"]["prompts"] == [str(path)]
    assert "2 prompts per workload" in proc.stdout
    assert sorted((r["workload"], r["task_id"], r["mode"]) for r in report["runs"]) == [
        ("mine", "counting", "lookup"), ("mine", "counting", "plain"),
        ("mine", "mine/1", "lookup"), ("mine", "mine/1", "plain")]
    assert all(r["identical_to_plain"] for r in report["runs"] if r["mode"] == "lookup")
    assert {(r["workload"], r["mode"]) for r in report["rows"]} == {("mine", "plain"), ("mine", "lookup")}


def test_a_prompts_file_runs_beside_a_named_workload(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    path = prompts_file(tmp_path, [{"prompt": "Say hello."}], name="greetings.jsonl")
    out = tmp_path / "bench.json"
    proc = bench("--target", str(tiny_models["bpe"]), "--mode", "lookup", "--workload", "prose", "--limit", "1",
                 "--prompts", str(path), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["settings"]["workloads"] == ["prose", "greetings"]


@pytest.mark.parametrize(("names", "message"), [
    (("edits.jsonl",), "two workloads are named 'edits': rename a prompts file"),
    (("mine.jsonl", "other/mine.jsonl"), "two workloads are named 'mine': rename a prompts file"),
], ids=["same-as-a-shipped-workload", "two-files-one-name"])
def test_two_workloads_of_one_name_are_refused_before_a_model_loads(tmp_path: Path, names: tuple[str, ...],
                                                                     message: str) -> None:
    args: list[str] = ["--target", str(tmp_path / "absent.gguf"), "--workload", "edits"]
    for name in names:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        args += ["--prompts", str(prompts_file(tmp_path, [{"prompt": "a"}], name=name))]
    proc = bench(*args)
    assert proc.returncode != 0
    assert proc.stderr.strip() == f"ds4spec: error: {message}"


def test_a_prompts_file_runs_whole_unless_limited_while_a_shipped_workload_runs_five(tiny_models: dict[str, Path],
                                                                                  tmp_path: Path) -> None:
    path = prompts_file(tmp_path, [{"text": f"count: {i} {i + 1}"} for i in range(7)])
    out = tmp_path / "bench.json"
    proc = bench("--target", str(tiny_models["bpe"]), "--mode", "lookup", "--workload", "prose", "--prompts",
                 str(path), "--out", str(out), "--max-tokens", "2")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["settings"]["prompts_per_workload"] == {"prose": 5, "mine": 7}
    assert "prompts per workload: prose 5, mine 7" in proc.stdout
