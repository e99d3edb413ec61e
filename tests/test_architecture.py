"""The house: the layers' direction holds (import-linter contracts in pyproject.toml), and commands that load no model
stay light."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("llama_cpp", "torch", "transformers", "textual")


def test_the_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    proc = subprocess.run([str(lint), "--config", str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    assert "0 broken" in proc.stdout


def _loaded_after(argv: list[str], stdin: str = "") -> tuple[int, list[str]]:
    """Runs ``ds4spec *argv`` in a fresh interpreter; its exit code and which heavy packages it imported."""
    code = (
        "import sys\n"
        "from ds4spec.cli import main\n"
        "try:\n"
        f"    code = main({argv!r})\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "import json\n"
        f"print('\\nLOADED', json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, input=stdin, capture_output=True, text=True,
                          timeout=120)
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("LOADED"))
    return proc.returncode, json.loads(line.removeprefix("LOADED "))


@pytest.mark.parametrize("argv", [
    ["--help"], ["--version"], ["complete", "--help"], ["chat", "--help"], ["repl", "--help"], ["models", "--help"],
    ["bench", "--help"], ["doctor", "--help"], ["serve", "--help"],
], ids=" ".join)
def test_help_and_version_load_neither_llama_cpp_nor_torch(argv: list[str]) -> None:
    code, loaded = _loaded_after(argv)
    assert code == 0
    assert loaded == []


def test_loading_a_model_does_load_llama_cpp(tiny_bpe_gguf: Path) -> None:
    """The check above can fail: the same probe sees llama.cpp once a command loads a model."""
    code, loaded = _loaded_after(["complete", "--target", str(tiny_bpe_gguf), "--draft", "none", "--max-tokens", "2"],
                                 stdin="def main():\n")
    assert code == 0
    assert loaded == ["llama_cpp"]
