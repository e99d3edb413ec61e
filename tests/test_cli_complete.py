"""`ds4spec complete` through the real CLI in a subprocess: output contract and every bad input."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from unittest.mock import ANY

import pytest
from tinymodel import build_tiny_gguf

from ds4spec.engine.context_files import ContextFile, with_files

PROMPT = b"def fibonacci(n):\n"


def ds4spec(*args: str, stdin: bytes = PROMPT, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Runs the CLI; `complete` speculates with the lookup drafter unless the test names another."""
    if args[:1] == ("complete",) and not any(a.startswith("--draft") for a in args):
        args = (*args, "--draft", "lookup", "--warmup", "0")
    return subprocess.run(
        [sys.executable, "-m", "ds4spec", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def one_line_error(proc: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    err = proc.stderr.decode()
    assert proc.returncode == code, err
    assert proc.stdout == b"", "nothing may be half-written on stdout"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ds4spec: error: "), err
    for needle in needles:
        assert needle in lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def slow_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Big enough that generating takes seconds, so that a Ctrl-C lands in the middle."""
    path = tmp_path_factory.mktemp("slow") / "slow.gguf"
    return build_tiny_gguf(path, n_embd=512, n_layer=8, n_head=8, context_length=8192, never_ends=True)


def test_stdout_carries_only_the_completion(tiny_bpe_gguf: Path) -> None:
    proc = ds4spec("complete", "--target", str(tiny_bpe_gguf), "--max-tokens", "30")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    again = ds4spec("complete", "--target", str(tiny_bpe_gguf), "--max-tokens", "30")
    assert proc.stdout == again.stdout and proc.stdout


def test_json_output_is_one_object_with_text_and_statistics(tiny_bpe_gguf: Path) -> None:
    plain = ds4spec("complete", "--target", str(tiny_bpe_gguf), "--max-tokens", "25")
    proc = ds4spec("complete", "--target", str(tiny_bpe_gguf), "--max-tokens", "25", "--json")
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    assert obj["text"] == plain.stdout.decode()
    assert obj["finish_reason"] in ("length", "eog")
    assert obj["stats"]["committed_tokens"] <= 25 and obj["stats"]["prompt_tokens"] > 0
    assert proc.stdout.count(b"\n") == 1


def test_stats_go_to_stderr(tiny_bpe_gguf: Path) -> None:
    proc = ds4spec("complete", "--target", str(tiny_bpe_gguf), "--max-tokens", "5", "--stats")
    assert proc.returncode == 0
    assert b"tokens/s" in proc.stderr and b"tokens/s" not in proc.stdout


def test_seeded_sampling_is_reproducible_from_the_command_line(tiny_bpe_gguf: Path) -> None:
    args = ("complete", "--target", str(tiny_bpe_gguf), "--max-tokens", "30", "--temperature", "1", "--seed")
    assert ds4spec(*args, "3").stdout == ds4spec(*args, "3").stdout


def test_stop_flag_is_repeatable_and_cuts_the_output(tiny_bpe_gguf: Path) -> None:
    full = ds4spec("complete", "--target", str(tiny_bpe_gguf), "--max-tokens", "40").stdout.decode()
    assert len(full) > 8
    stop = full[5:8]
    proc = ds4spec("complete", "--target", str(tiny_bpe_gguf), "--max-tokens", "40", "--stop", "NEVER",
                   "--stop", stop)
    assert proc.stdout.decode() == full[: full.find(stop)]


def test_fim_fills_in_at_the_cursor_marker(tiny_bpe_gguf: Path) -> None:
    proc = ds4spec("complete", "--target", str(tiny_bpe_gguf), "--fim", "--max-tokens", "10",
                   stdin=b"def f():\n    <CURSOR>\n    return y\n")
    assert proc.returncode == 0, proc.stderr


def test_empty_stdin_is_an_input_error(tiny_bpe_gguf: Path) -> None:
    one_line_error(ds4spec("complete", "--target", str(tiny_bpe_gguf), stdin=b""), 2, "stdin is empty")


def test_bytes_that_are_not_utf8_are_an_input_error(tiny_bpe_gguf: Path) -> None:
    proc = ds4spec("complete", "--target", str(tiny_bpe_gguf), stdin=b"x = '\xff\xfe'\n")
    one_line_error(proc, 2, "not UTF-8", "offset 5")


def test_prompt_longer_than_the_context_names_both_sizes(tiny_bpe_gguf: Path) -> None:
    long = b"x = 1\n" * 400
    line = one_line_error(ds4spec("complete", "--target", str(tiny_bpe_gguf), "--ctx", "256", stdin=long), 2)
    assert "the prompt is " in line and "context holds 256" in line and "--truncate left" in line


def test_truncate_left_keeps_the_end_of_a_long_prompt(tiny_bpe_gguf: Path) -> None:
    long = b"x = 1\n" * 400
    proc = ds4spec("complete", "--target", str(tiny_bpe_gguf), "--ctx", "256", "--truncate", "left",
                   "--max-tokens", "5", "--json", stdin=long)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["stats"]["prompt_tokens"] < 256


def test_fim_without_a_marker_is_an_input_error(tiny_bpe_gguf: Path) -> None:
    one_line_error(ds4spec("complete", "--target", str(tiny_bpe_gguf), "--fim"), 2, "cursor marker")


def test_fim_with_two_markers_is_refused_before_the_model_loads(tmp_path: Path) -> None:
    """The target does not exist: the marker is counted first."""
    proc = ds4spec("complete", "--target", str(tmp_path / "none.gguf"), "--fim", stdin=b"a<CURSOR>b<CURSOR>c")
    one_line_error(proc, 2, "found 2")


def test_a_language_no_trigger_rule_knows_gets_a_note_and_the_generic_rules(tiny_bpe_gguf: Path) -> None:
    """``--language pyhton`` (a typo) went by silently, with the generic code rules."""
    base = ("complete", "--target", str(tiny_bpe_gguf), "--max-tokens", "4", "--draft", "lookup")
    typo = ds4spec(*base, "--language", "pyhton")
    assert typo.returncode == 0, typo.stderr
    note = "no trigger rules know the language 'pyhton', so the generic code rules apply (known: "
    assert note in typo.stderr.decode()
    for known in ("python", "main.rs", "tsx"):  # a name, a file name, a fence tag
        assert b"no trigger rules know" not in ds4spec(*base, "--language", known).stderr


def test_seed_minus_one_draws_a_random_seed(tiny_bpe_gguf: Path) -> None:
    """As llama.cpp and the HTTP API read it; it was a numpy traceback after the load."""
    proc = ds4spec("complete", "--target", str(tiny_bpe_gguf), "--max-tokens", "4", "--temperature", "1", "--seed",
                   "-1", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["stats"]["seed"] >= 0


def test_fim_on_a_model_without_fim_tokens_is_refused(tmp_path: Path) -> None:
    path = build_tiny_gguf(tmp_path / "nofim.gguf", fim=False)
    one_line_error(ds4spec("complete", "--target", str(path), "--fim", stdin=b"a<CURSOR>b"), 1, "fill-in-the-middle")


def test_missing_model_file_is_a_runtime_error(tmp_path: Path) -> None:
    one_line_error(ds4spec("complete", "--target", str(tmp_path / "absent.gguf")), 1, "absent.gguf")


def test_corrupt_model_file_is_refused_with_one_line(tmp_path: Path, tiny_bpe_gguf: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(tiny_bpe_gguf.read_bytes()[: 4096])  # a truncated GGUF: header fine, tensors gone
    one_line_error(ds4spec("complete", "--target", str(broken)), 1, "broken.gguf")
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"not a model at all")
    one_line_error(ds4spec("complete", "--target", str(garbage)), 1, "garbage.gguf")


def test_a_context_llama_cpp_cannot_create_frees_the_model_once(tiny_bpe_gguf: Path) -> None:
    """``--ctx 1000000`` on the default target: llama.cpp cannot allocate the cache and returns no context, and the
    model was then freed twice, a segfault (exit 139) after the error. Whether an allocation fails depends on the
    machine's memory, so here llama.cpp's context call is made to return none, in a process of its own."""
    script = (
        "import sys, gc\n"
        "from ds4spec.backend import target\n"
        "from ds4spec.errors import ModelError\n"
        "target.llama_cpp.llama_init_from_model = lambda model, params: None\n"
        "try:\n"
        "    target.LlamaTarget(sys.argv[1])\n"
        "except ModelError as err:\n"
        "    print(err)\n"
        "gc.collect()\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(tiny_bpe_gguf)], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert proc.stdout.decode().startswith("llama.cpp could not create a context of")


def test_unknown_model_name_lists_the_known_ones() -> None:
    one_line_error(ds4spec("complete", "--target", "gpt-17"), 2, "unknown model 'gpt-17'", "qwen2.5-coder-1.5b")


def test_a_missing_pair_drafter_falls_back_to_lookup_with_a_note(tiny_bpe_gguf: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "ds4spec", "complete", "--target", str(tiny_bpe_gguf),
                           "--max-tokens", "8"], input=PROMPT, capture_output=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout
    assert proc.stderr.decode().startswith("ds4spec: note: model smollm2-135m is not downloaded")
    assert "drafting with text lookup only" in proc.stderr.decode()


def test_a_missing_pair_drafter_without_triggers_falls_back_to_plain_decoding(tiny_bpe_gguf: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "ds4spec", "complete", "--target", str(tiny_bpe_gguf),
                           "--no-triggers", "--max-tokens", "8"], input=PROMPT, capture_output=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout
    assert "decoding without speculation" in proc.stderr.decode()


def test_a_named_drafter_that_is_missing_is_an_error(tiny_bpe_gguf: Path) -> None:
    one_line_error(ds4spec("complete", "--target", str(tiny_bpe_gguf), "--draft", "smollm2-135m"), 1,
                   "ds4spec models pull smollm2-135m")


def test_speculative_output_equals_plain_output_through_the_cli(tiny_bpe_gguf: Path) -> None:
    base = ("complete", "--target", str(tiny_bpe_gguf), "--max-tokens", "40")
    plain = ds4spec(*base, "--draft", "none", stdin=PROMPT * 3)
    spec = ds4spec(*base, "--draft", "lookup", "--draft-max", "6", "--warmup", "0", "--stats", stdin=PROMPT * 3)
    assert spec.returncode == 0 and plain.returncode == 0
    assert spec.stdout == plain.stdout


def test_context_files_come_before_the_text_as_the_chat_shows_them(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    (tmp_path / "fib.py").write_text("def fibonacci(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n")
    (tmp_path / "notes.txt").write_text("Memoize it.\n")
    base = ("complete", "--target", str(tiny_bpe_gguf), "--max-tokens", "30", "--json")
    with_context = ds4spec(*base, "--context", "fib.py", "--context", "notes.txt", cwd=tmp_path)
    files = [ContextFile(n, (tmp_path / n).read_text()) for n in ("fib.py", "notes.txt")]
    by_hand = ds4spec(*base, stdin=with_files(files, PROMPT.decode()).encode(), cwd=tmp_path)
    assert with_context.returncode == 0, with_context.stderr
    assert json.loads(with_context.stdout) == {**json.loads(by_hand.stdout), "stats": ANY}
    assert json.loads(with_context.stdout)["stats"]["prompt_tokens"] == json.loads(by_hand.stdout)["stats"][
        "prompt_tokens"]


def test_speculation_with_context_files_equals_plain_output(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    (tmp_path / "fib.py").write_text(PROMPT.decode() * 4)
    base = ("complete", "--target", str(tiny_bpe_gguf), "--max-tokens", "40", "--context", "fib.py")
    plain = ds4spec(*base, "--draft", "none", cwd=tmp_path)
    spec = ds4spec(*base, "--draft", "lookup", "--draft-max", "6", "--warmup", "0", cwd=tmp_path)
    assert plain.returncode == 0 and spec.returncode == 0 and spec.stdout == plain.stdout


@pytest.mark.parametrize(("make", "why"), [
    (None, "no such file: missing.py"),
    (lambda d: (d / "missing.py").write_bytes(b"\x00\x01"), "missing.py is a binary file, not text"),
    (lambda d: (d / "missing.py").mkdir(), "missing.py is a directory"),
], ids=["missing", "binary", "directory"])
def test_a_bad_context_file_is_one_line_before_anything_loads(tiny_bpe_gguf: Path, tmp_path: Path, make: object,
                                                              why: str) -> None:
    if callable(make):
        make(tmp_path)
    one_line_error(ds4spec("complete", "--target", str(tiny_bpe_gguf), "--context", "missing.py", cwd=tmp_path), 2,
                   why)


def test_default_model_not_downloaded_says_how_to_pull_it() -> None:
    one_line_error(ds4spec("complete"), 1, "ds4spec models pull")


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--max-tokens", "0"], "--max-tokens"),
        (["--top-p", "1.5"], "--top-p must be"),
        (["--temperature", "-1"], "--temperature must be"),
        (["--temperature", "nan"], "--temperature must be"),
        (["--repeat-penalty", "nan"], "--repeat-penalty must be"),
        (["--threads", "-3"], "--threads must be at least 1"),
        (["--seed", "-2"], "--seed must be from 0 to 2^64-1, or -1"),
        (["--fim", "--cursor-marker", ""], "--cursor-marker must not be empty"),
        (["--max-tokens", "many"], "invalid int value"),
        (["--no-such-flag"], "unrecognized arguments"),
        (["--truncate", "right"], "invalid choice"),
    ],
)
def test_bad_flags_are_usage_errors(tiny_bpe_gguf: Path, flags: list[str], needle: str) -> None:
    one_line_error(ds4spec("complete", "--target", str(tiny_bpe_gguf), *flags), 2, needle)


def test_bad_config_file_is_a_usage_error(tmp_path: Path, tiny_bpe_gguf: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text("max_tokenz = 3\n")
    proc = ds4spec("complete", "--target", str(tiny_bpe_gguf), env={"DS4SPEC_CONFIG": str(cfg)})
    one_line_error(proc, 2, "max_tokenz")


def test_ctrl_c_keeps_what_was_written_and_exits_130(slow_model: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ds4spec", "complete", "--target", str(slow_model), "--max-tokens", "1000",
         "--ctx", "4096", "--stats"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdin and proc.stdout
    proc.stdin.write(PROMPT)
    proc.stdin.close()
    first = proc.stdout.read(20)  # generation is under way once text arrives
    time.sleep(0.1)  # 1000 tokens take seconds even on a fast machine: it is still generating
    proc.send_signal(signal.SIGINT)
    rest = proc.stdout.read()
    code = proc.wait(timeout=30)
    assert proc.stderr
    stderr = proc.stderr.read().decode()
    assert code == 130, stderr
    assert len(first) == 20 and len(first + rest) < 1000 * 8
    # The generation stopped at a clean point and reports what it generated, not an empty count.
    generated = re.search(r"generated (\d+) tokens .*; finish: cancelled", stderr)
    assert generated and int(generated.group(1)) > 0, stderr
    full = subprocess.run(
        [sys.executable, "-m", "ds4spec", "complete", "--target", str(slow_model), "--max-tokens", "1000",
         "--ctx", "4096"], input=PROMPT, capture_output=True, timeout=300,
    ).stdout
    assert full.startswith(first + rest) and len(full) > len(first + rest)
