"""A file in the conversation with the real default pair: asked for a rename, the speculative answer equals
plain greedy decoding of the same prompt, drafts come from the file, and /apply writes the renamed file."""

from __future__ import annotations

from pathlib import Path

import pytest
from spec_helpers import assert_lossless, run_plain

from ds4spec.core.events import Finished
from ds4spec.core.plain import GenerationRequest
from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings
from ds4spec.faces.shared.conversation import Conversation
from ds4spec.faces.shared.fences import code_blocks
from ds4spec.faces.shared.sessions import SessionStore
from ds4spec.faces.shared.slash import run_command

INVENTORY = '''"""A small shop inventory."""


def total_price(items):
    """The price of all items, each a (name, price, count) tuple."""
    return sum(price * count for _, price, count in items)


def cheapest(items):
    """The name of the cheapest item."""
    return min(items, key=lambda item: item[1])[0]


if __name__ == "__main__":
    stock = [("pen", 1.5, 10), ("book", 12.0, 2)]
    print(total_price(stock), cheapest(stock))
'''
ASK = ("Rename the function `total_price` to `inventory_value` everywhere in inventory.py, keep everything else "
       "unchanged, and reply with the complete updated file in one fenced block.")


def test_a_rename_of_a_file_in_the_conversation_is_lossless_and_applies(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inventory.py").write_text(INVENTORY)
    settings = Settings(ctx=2048, max_tokens=320)  # the default pair, triggers and all, as `ds4spec chat` runs
    store = SessionStore(tmp_path / "sessions.sqlite3")
    with Engine.load(settings) as engine:
        conv = Conversation(engine, store)
        run_command("/add inventory.py", conv)
        prompt = engine.chat_prompt(conv.messages(ASK))
        spec = list(conv.send(ASK))[-1]
        assert isinstance(spec, Finished)
        request = GenerationRequest(prompt.tokens, settings.max_tokens, settings.sampling(), tuple(settings.stop))
        plain = run_plain(engine.target, request)
        flipped = assert_lossless(engine.target, request, plain, spec)
        print(f"{spec.stats.summary_line()}; near-tie flip: {flipped}")
        assert spec.stats.accepted_tokens > 0, "the drafters drafted nothing from the file"

        answer = conv.history()[-1].content
        result = run_command("/apply", conv)
        assert result.confirm is not None
        assert result.confirm.accept().startswith("wrote inventory.py")
    written = (tmp_path / "inventory.py").read_text()
    assert written == code_blocks(answer)[-1].code
    assert "def inventory_value(items):" in written and "total_price" not in written
    assert "def cheapest(items):" in written
    store.close()
