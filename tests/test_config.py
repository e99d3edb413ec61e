"""Configuration: defaults, then the file, then the environment, then flags; bad values name their source."""

from __future__ import annotations

from pathlib import Path

import pytest

from ds4spec.cli import build_parser
from ds4spec.engine.loading import spec_settings
from ds4spec.engine.options import settings_from_args
from ds4spec.engine.settings import Settings, load_settings
from ds4spec.errors import UsageError


def test_defaults_are_greedy_with_a_4k_context(tmp_path: Path) -> None:
    s = load_settings(env={}, path=tmp_path / "absent.toml")
    assert s == Settings()
    assert s.sampling().greedy and s.ctx == 4096


def test_file_then_environment_then_flags_each_override_the_previous(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text('max_tokens = 10\ntemperature = 0.5\nctx = 1024\nstop = ["\\n\\n"]\n')
    env = {"DS4SPEC_TEMPERATURE": "0.7", "DS4SPEC_CTX": "2048"}
    s = load_settings({"ctx": 8192, "seed": None}, env=env, path=cfg)
    assert (s.max_tokens, s.temperature, s.ctx, s.stop, s.seed) == (10, 0.7, 8192, ("\n\n",), None)


def test_unknown_key_in_the_file_is_rejected_with_file_and_key(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text("max_tokenz = 3\n")
    with pytest.raises(UsageError, match=r"config\.toml: unknown key 'max_tokenz'"):
        load_settings(env={}, path=cfg)


def test_malformed_file_is_rejected(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text("max_tokens = = 3\n")
    with pytest.raises(UsageError, match="not valid TOML"):
        load_settings(env={}, path=cfg)


def test_bad_environment_value_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="DS4SPEC_MAX_TOKENS: max_tokens must be an integer"):
        load_settings(env={"DS4SPEC_MAX_TOKENS": "lots"}, path=tmp_path / "absent.toml")


def test_wrong_type_in_the_file_is_rejected(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text('stop = 3\n')
    with pytest.raises(UsageError, match="stop must be a list of strings"):
        load_settings(env={}, path=cfg)


def test_optional_values_can_be_cleared_from_the_environment(tmp_path: Path) -> None:
    s = load_settings(env={"DS4SPEC_SEED": "none", "DS4SPEC_TARGET": "./m.gguf"}, path=tmp_path / "x.toml")
    assert s.seed is None and s.target == "./m.gguf"


@pytest.mark.parametrize("argv", [["complete", "--draft-fixed"], ["serve", "--draft-fixed"], ["bench", "--fixed"],
                                  ["bench", "--draft-fixed"]])
def test_a_fixed_draft_length_is_one_setting_for_every_command(argv: list[str], tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS4SPEC_CONFIG", str(tmp_path / "absent.toml"))
    assert settings_from_args(build_parser().parse_args(argv)).draft_fixed is True
    assert settings_from_args(build_parser().parse_args(argv[:1])).draft_fixed is False


@pytest.mark.parametrize("command", ["complete", "chat", "serve", "bench"])
def test_the_confidence_stop_is_on_unless_turned_off_and_reaches_the_loop(command: str, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS4SPEC_CONFIG", str(tmp_path / "absent.toml"))
    on = settings_from_args(build_parser().parse_args([command]))
    off = settings_from_args(build_parser().parse_args([command, "--no-confidence-stop"]))
    assert spec_settings(on).confidence_stop is True and spec_settings(off).confidence_stop is False
    cfg = tmp_path / "config.toml"
    cfg.write_text("confidence_stop = false\n")
    assert load_settings(env={}, path=cfg).confidence_stop is False
