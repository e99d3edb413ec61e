"""`ds4spec chat` driven by Textual's Pilot on tiny real models: what a user does, and what they see.

Each test runs the real app headless (``App.run_test``) with a real Engine on a tiny GGUF model and a real
session file; nothing is stubbed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from chat_helpers import (
    answered,
    drive,
    make_app,
    notes,
    press_enter,
    ready,
    send,
    status_line,
    tiny_settings,
    until,
    views,
)
from spec_helpers import TimedModel
from textual.pilot import Pilot
from textual.widgets import Markdown, Static
from tinymodel import build_tiny_gguf

from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.target_options import TargetOptions
from ds4spec.core.events import Provenance, TextChunk
from ds4spec.drafters.guard import GuardedDrafter
from ds4spec.drafters.hybrid import HybridDrafter
from ds4spec.drafters.lookup import LookupDrafter
from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings
from ds4spec.faces.chat.app import ChatApp
from ds4spec.faces.chat.loader import missing_models, prepare_engine
from ds4spec.faces.chat.provenance import DRAFT_STYLE, TARGET_STYLE
from ds4spec.faces.chat.widgets import ChatInput
from ds4spec.faces.shared.sessions import SessionStore
from ds4spec.store import local as store
from ds4spec.store.manifests import find_manifest


@pytest.fixture(scope="module")
def endless_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model that never ends an answer by itself, so that there is time to cancel it."""
    return build_tiny_gguf(tmp_path_factory.mktemp("endless") / "endless.gguf", never_ends=True)


def stored(app: ChatApp) -> list[tuple[str, str, str]]:
    return [(m.role, m.content, m.status) for m in app.store.messages(app.conversation.session_id)]


# -- sending and streaming -------------------------------------------------------------------------------


def test_a_message_streams_an_answer_that_is_shown_and_stored(endless_gguf: Path, tmp_path: Path) -> None:
    app = make_app(endless_gguf, tmp_path / "sessions.sqlite3", max_tokens=100)
    seen: list[int] = []  # the answer's length on screen, sampled by a timer inside the app every 10 ms

    def sample() -> None:
        answers = views(app, "assistant")
        if answers and answers[0].status == "streaming":
            seen.append(len(answers[0].text))

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        assert "target ds4spec-tiny-bpe" in status_line(app) and "ready" in status_line(app)
        app.set_interval(0.01, sample)
        await send(pilot, "hello there")
        await answered(pilot)
        answer = views(app, "assistant")[0]
        assert [v.text for v in views(app, "user")] == ["hello there"]
        assert answer.status == "done" and answer.text
        assert stored(app) == [("user", "hello there", "done"), ("assistant", answer.text, "done")]
        assert app.query_one(ChatInput).text == ""
        assert all(word in status_line(app) for word in ("tok/s", "accept", "mean accepted", "event"))
        partial = set(seen) - {0, len(answer.text)}
        assert len(partial) >= 2, f"the answer must appear piece by piece, not at the end (saw {seen})"

    drive(app, scenario)


def test_enter_sends_and_ctrl_j_or_shift_enter_starts_a_new_line(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3")

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await pilot.press("a", "ctrl+j", "b", "shift+enter", "c")
        assert app.query_one(ChatInput).text == "a\nb\nc"
        await press_enter(pilot)
        await answered(pilot)
        assert stored(app)[0][:2] == ("user", "a\nb\nc")

    drive(app, scenario)


def test_an_empty_message_gives_a_notice_and_stores_nothing(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3")

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await send(pilot, "  \n ")
        await pilot.pause()
        assert any("Type a message first" in n.message for n in app._notifications)
        assert stored(app) == [] and views(app) == []

    drive(app, scenario)


def test_a_paste_longer_than_the_context_is_refused_and_stays_in_the_input(tiny_bpe_gguf: Path,
                                                                           tmp_path: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3", ctx=64)
    paste = "def f(x):\n    return x\n" * 40

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await send(pilot, paste)
        await answered(pilot)
        assert app.query_one(ChatInput).text == paste
        assert any("but the context holds" in n.message for n in app._notifications)
        assert stored(app) == [] and views(app) == []
        assert "ready" in status_line(app)

    drive(app, scenario)


# -- cancelling --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["escape", "ctrl+c"])
def test_esc_or_ctrl_c_cancels_the_answer_keeps_it_and_leaves_the_app_open(key: str, endless_gguf: Path,
                                                                           tmp_path: Path) -> None:
    app = make_app(endless_gguf, tmp_path / "sessions.sqlite3", max_tokens=100_000)

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await send(pilot, "write forever")
        await until(pilot, lambda: len(views(app, "assistant")) == 1 and len(views(app, "assistant")[0].text) > 20)
        await pilot.press(key)
        await answered(pilot)
        answer = views(app, "assistant")[0]
        assert app.is_running
        assert answer.status == "cancelled" and "cancelled" in str(answer.query_one(".role", Static).render())
        assert stored(app)[-1] == ("assistant", answer.text, "cancelled")
        assert "cancelled" in status_line(app)
        await send(pilot, "/stats")  # still working: the next thing typed is handled
        await answered(pilot)
        assert "last answer" in notes(app)[-1]

    drive(app, scenario)


def test_ctrl_c_with_nothing_to_cancel_says_how_to_quit(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3")

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.is_running
        assert any("Ctrl-Q quits" in n.message for n in app._notifications)
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert not app.is_running

    drive(app, scenario)


def test_quitting_while_an_answer_streams_stores_it_as_cancelled(endless_gguf: Path, tmp_path: Path) -> None:
    app = make_app(endless_gguf, tmp_path / "sessions.sqlite3", max_tokens=100_000)

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await send(pilot, "write forever")
        await until(pilot, lambda: len(views(app, "assistant")) == 1 and len(views(app, "assistant")[0].text) > 5)
        await pilot.press("ctrl+q")

    drive(app, scenario)
    reopened = SessionStore(tmp_path / "sessions.sqlite3")
    messages = reopened.messages(app.conversation.session_id)
    assert messages[-1].role == "assistant" and messages[-1].status == "cancelled" and messages[-1].content


# -- provenance -----------------------------------------------------------------------------------------


def test_the_provenance_view_colours_drafted_and_target_text(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3")

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await send(pilot, "hello")
        await answered(pilot)
        real = views(app, "assistant")[0]
        stats = app.conversation.last_stats
        assert stats is not None and real.spans.text == real.text
        # Every character the drafter got accepted is recorded as such (tiny models rarely agree with a drafter).
        assert (real.spans.share(Provenance.DRAFT) > 0) == (stats.accepted_tokens > 0)
        # The same path the generation worker takes, with chunks of both kinds: what a real pair produces.
        mixed = views(app, "assistant")[0]
        for text, who in [("def ", Provenance.TARGET), ("add(a, b):", Provenance.DRAFT), ("\n", Provenance.TARGET)]:
            await mixed.append(TextChunk(text, who))
        assert mixed.query_one(Markdown).styles.display == "block"
        assert mixed.query_one(".provenance").styles.display == "none"

        await pilot.press("ctrl+t")
        await pilot.pause()
        coloured = mixed.query_one(".provenance", Static)
        assert app.provenance_shown and coloured.styles.display == "block"
        assert mixed.query_one(Markdown).styles.display == "none"
        assert str(coloured.render()).endswith("def add(a, b):\n")  # what the view shows ...
        drawn = mixed.spans.render()  # ... drawn from this Rich text
        styles = {str(span.style) for span in drawn.spans if drawn.plain[span.start:span.end] == "add(a, b):"}
        assert styles == {DRAFT_STYLE}
        assert {str(span.style) for span in drawn.spans} >= {DRAFT_STYLE, TARGET_STYLE}

        await pilot.press("ctrl+t")
        await pilot.pause()
        assert not app.provenance_shown and mixed.query_one(Markdown).styles.display == "block"

    drive(app, scenario)


# -- slash commands --------------------------------------------------------------------------------------


def test_help_stats_system_and_save_commands(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3")
    saved = tmp_path / "out" / "chat.md"

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await send(pilot, "/help")
        await answered(pilot)
        assert all(f"/{name}" in notes(app)[-1] for name in ("new", "clear", "save", "spec", "draft", "stats",
                                                              "system", "copy", "help"))
        assert app.query_one(ChatInput).text == ""  # a command leaves the input, not the conversation
        await send(pilot, "/stats")
        await answered(pilot)
        assert "no answer yet" in notes(app)[-1]
        await send(pilot, "/system You answer in Python.")
        await answered(pilot)
        assert app.conversation.system == "You answer in Python."
        assert [(v.role, v.text) for v in views(app)] == [("system", "You answer in Python.")]
        await send(pilot, "hello")
        await answered(pilot)
        await send(pilot, "/stats")
        await answered(pilot)
        assert "last answer" in notes(app)[-1] and "session: 1 answers" in notes(app)[-1]
        await send(pilot, f"/save {saved}")
        await answered(pilot)
        assert str(saved) in notes(app)[-1]
        assert "You answer in Python." in saved.read_text() and "hello" in saved.read_text()
        assert [m.role for m in app.store.messages(app.conversation.session_id)] == ["user", "assistant"]

    drive(app, scenario)


def test_spec_and_draft_commands_change_the_drafter_in_the_status_bar(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3")

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        assert "drafter lookup ·" in status_line(app)
        await send(pilot, "/spec off")
        await answered(pilot)
        assert "plain decoding" in notes(app)[-1] and "drafter lookup (idle" in status_line(app)
        await send(pilot, "/spec on")
        await answered(pilot)
        assert "drafter lookup ·" in status_line(app)
        await send(pilot, "/draft none")
        await answered(pilot)
        assert "drafter none (plain decoding)" in status_line(app)
        await send(pilot, f"/draft {tiny_bpe_gguf}")
        await answered(pilot)
        assert f"drafter {app.conversation.engine.drafter_name} ·" in status_line(app)  # type: ignore[union-attr]
        await send(pilot, "/draft no-such-model")
        await answered(pilot)
        assert "no-such-model" in notes(app)[-1]
        assert app.query(".-error")  # shown as an error note; the drafter in use stays
        await send(pilot, "hello")  # and the chat goes on with it
        await answered(pilot)
        assert views(app, "assistant")[-1].status == "done"

    drive(app, scenario)


def test_new_clear_and_copy_commands(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3")

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await send(pilot, "/copy")
        await answered(pilot)
        assert "nothing to copy" in notes(app)[-1]
        await send(pilot, "hello")
        await answered(pilot)
        answer = views(app, "assistant")[-1].text
        await send(pilot, "/copy")
        await answered(pilot)
        assert app.clipboard == answer and "copied" in notes(app)[-1]
        first = app.conversation.session_id
        await send(pilot, "/new")
        await answered(pilot)
        assert app.conversation.session_id != first and views(app) == []
        assert [m.role for m in app.store.messages(first)] == ["user", "assistant"]  # the old one is kept
        await send(pilot, "again")
        await answered(pilot)
        await send(pilot, "/clear")
        await answered(pilot)
        assert views(app) == [] and app.store.messages(app.conversation.session_id) == []
        await send(pilot, "/bogus")
        await answered(pilot)
        assert "unknown command /bogus" in notes(app)[-1]

    drive(app, scenario)


def test_copy_takes_the_last_code_block_of_a_resumed_session(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions.sqlite3")
    sid = store.new_session()
    store.add_message(sid, "user", "reverse a list")
    store.add_message(sid, "assistant", "Use slicing:\n\n```python\nitems[::-1]\n```\n")
    store.close()
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3", session_id=sid)

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await send(pilot, "/copy")
        await answered(pilot)
        assert app.clipboard == "items[::-1]\n"

    drive(app, scenario)


# -- sessions ---------------------------------------------------------------------------------------------


def test_a_resumed_session_shows_its_messages_and_goes_on(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions.sqlite3")
    sid = store.new_session(system="Be brief.")
    store.add_message(sid, "user", "first question")
    store.add_message(sid, "assistant", "a partial answer", status="streaming")  # the process was killed
    store.close()
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3", session_id=sid)

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        assert [(v.role, v.text, v.status) for v in views(app)] == [
            ("system", "Be brief.", "done"), ("user", "first question", "done"),
            ("assistant", "a partial answer", "cancelled"),
        ]
        await send(pilot, "second question")
        await answered(pilot)
        assert [m.content for m in app.store.messages(sid)][:3] == ["first question", "a partial answer",
                                                                     "second question"]
        assert app.conversation.session_id == sid

    drive(app, scenario)


def test_the_session_list_reopens_an_older_session(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions.sqlite3")
    old = store.new_session()
    store.add_message(old, "user", "an old question")
    store.add_message(old, "assistant", "an old answer")
    store.close()
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3")

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await send(pilot, "a new question")
        await answered(pilot)
        await pilot.press("ctrl+o")
        await pilot.pause()
        listed = str(app.screen.query_one("OptionList").get_option_at_index(1).prompt)
        assert "an old question" in listed and f"#{old}" in listed  # newest first: the old one is second
        await pilot.press("down", "enter")
        await until(pilot, lambda: app.conversation.session_id == old)
        assert [v.text for v in views(app)] == ["an old question", "an old answer"]
        assert "reopened session" in notes(app)[-1]
        await pilot.press("ctrl+o")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert app.conversation.session_id == old and app.screen.query("#input")

    drive(app, scenario)


def test_the_session_list_shows_a_title_as_typed_never_as_markup(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions.sqlite3")
    sid = store.new_session()
    store.add_message(sid, "user", "why does [b]x[/b] print [red]?")
    store.close()
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3", session_id=sid)

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await pilot.press("ctrl+o")
        await pilot.pause()
        listing = app.screen.query_one("OptionList")
        shown = "".join(listing.render_line(y).text for y in range(listing.size.height))
        assert "why does [b]x[/b] print [red]?" in shown

    drive(app, scenario)


# -- what can go wrong ------------------------------------------------------------------------------------


def test_a_damaged_session_file_is_named_and_the_chat_opens(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    app = make_app(tiny_bpe_gguf, path)

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        assert any(str(path) in note and "damaged" in note for note in notes(app))
        await send(pilot, "hello")
        await answered(pilot)
        assert views(app, "assistant")[-1].status == "done"

    drive(app, scenario)
    assert [m.role for m in SessionStore(path).messages(app.conversation.session_id)] == ["user", "assistant"]


def test_a_model_that_fails_to_load_is_reported_in_the_interface(tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    app = make_app(bad, tmp_path / "sessions.sqlite3")

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        assert app.load_error and "error" in status_line(app)
        label = str(app.query_one("#loading-label").render())
        assert label.startswith("could not load the models: ") and "Traceback" not in label
        await send(pilot, "hello")
        await pilot.pause()
        assert app.query_one(ChatInput).text == "hello"  # kept for when a model is there
        assert any("did not load" in n.message for n in app._notifications)
        await send(pilot, "/help")  # commands still work
        await answered(pilot)
        assert "/draft" in notes(app)[-1]

    drive(app, scenario)


def test_a_terminal_below_40x10_shows_a_message_instead_of_the_chat(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    app = make_app(tiny_bpe_gguf, tmp_path / "sessions.sqlite3")

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        message = app.query_one("#too-small")
        assert message.styles.display == "block" and "at least 40x10" in str(message.render())
        assert app.query_one("#main").styles.display == "none"
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert message.styles.display == "none" and app.query_one("#main").styles.display == "block"

    drive(app, scenario, size=(30, 8))


# -- first run ------------------------------------------------------------------------------------------


def tiny_pair_home(home: Path, target: Path, drafter: Path, *, drafter_source: bool = True) -> None:
    """A user manifest directory naming the two tiny models (copied from a local source) as pair ``tiny``."""
    manifests = home / "manifests"
    manifests.mkdir(parents=True)
    for name, model in (("tiny-target", target), ("tiny-drafter", drafter)):
        if name == "tiny-target" or drafter_source:
            shutil.copy(model, manifests / f"{name}-source.gguf")
        data = model.read_bytes()
        (manifests / f"{name}.toml").write_text(
            f'name = "{name}"\nfile = "{name}.gguf"\nsize = {len(data)}\n'
            f'sha256 = "{hashlib.sha256(data).hexdigest()}"\nlicense = "MIT"\narchitecture = "llama"\n'
            f'tokenizer = "tiny"\n\n[[sources]]\nkind = "local"\npath = "{name}-source.gguf"\n'
        )
    (manifests / "pairs.toml").write_text('[tiny]\ntarget = "tiny-target"\ndrafter = "tiny-drafter"\n')


def test_missing_models_of_the_pair_are_pulled_with_progress_then_loaded(
        tiny_models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS4SPEC_HOME", str(tmp_path / "home"))
    tiny_pair_home(tmp_path / "home", tiny_models["bpe"], tiny_models["spm"])
    settings = Settings(pair="tiny", warmup=0, max_tokens=8)
    assert [m.name for m in missing_models(settings)] == ["tiny-target", "tiny-drafter"]
    heard: list[tuple[str, int, int]] = []
    steps: list[str] = []
    engine = prepare_engine(settings, listener=lambda *p: heard.append(p), stage=steps.append)
    engine.close()
    assert steps == ["downloading tiny-target (first run)", "downloading tiny-drafter (first run)",
                     "loading the models"]
    size = tiny_models["bpe"].stat().st_size
    assert ("tiny-target (local)", size, size) in heard  # the same pull as `ds4spec models pull`, to the end
    assert missing_models(settings) == []
    assert [store.model_status(find_manifest(n)) for n in ("tiny-target", "tiny-drafter")] == ["verified"] * 2


def test_the_chat_pulls_a_missing_pair_on_first_run_and_says_so(tiny_models: dict[str, Path], tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS4SPEC_HOME", str(tmp_path / "home"))
    tiny_pair_home(tmp_path / "home", tiny_models["bpe"], tiny_models["spm"])
    app = ChatApp(Settings(pair="tiny", warmup=0, max_tokens=8), SessionStore(tmp_path / "sessions.sqlite3"))

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await pilot.pause()
        # (A third note may say that the tiny drafter is too slow to pay against the tiny target here.)
        assert [n.split(" to ")[0] for n in notes(app)][:2] == ["downloaded tiny-target", "downloaded tiny-drafter"]
        # A known drafter goes by its manifest name, not by the long name inside its GGUF.
        assert "target ds4spec-tiny-bpe" in status_line(app)
        assert "drafter hybrid(lookup+llama:tiny-drafter)" in status_line(app)
        assert app.query_one("#loading").styles.display == "none"

    drive(app, scenario)


def test_a_drafter_that_cannot_be_downloaded_leaves_the_chat_working_without_it(
        tiny_models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS4SPEC_HOME", str(tmp_path / "home"))
    tiny_pair_home(tmp_path / "home", tiny_models["bpe"], tiny_models["spm"], drafter_source=False)
    app = ChatApp(Settings(pair="tiny", warmup=0, max_tokens=8), SessionStore(tmp_path / "sessions.sqlite3"))

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await pilot.pause()
        assert notes(app)[0].startswith("downloaded tiny-target")
        assert "could not download tiny-drafter" in notes(app)[1] and "without this drafter" in notes(app)[1]
        assert len(notes(app)) == 2, "the engine does not say again that the drafter is missing"
        assert app.conversation.engine is not None and app.conversation.engine.drafter_name in (None, "lookup")
        assert f"drafter {app.conversation.engine.drafter_name or 'none'}" in status_line(app)
        await send(pilot, "hello")
        await answered(pilot)
        assert views(app, "assistant")[-1].status == "done"

    drive(app, scenario)


def test_a_drafter_too_slow_to_pay_is_named_in_the_conversation(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    """Textual owns stderr while the chat runs, so the note a command prints there is shown as a chat note."""

    def loader(settings: Settings, listener: object, stage: object, note: Callable[[str], None]) -> Engine:
        target = LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=512, n_gpu_layers=0))
        slow = GuardedDrafter(HybridDrafter(LookupDrafter(), TimedModel(0.05)), background=False)
        return Engine.assemble(settings, target, slow, None, note)

    app = ChatApp(tiny_settings(tiny_bpe_gguf), SessionStore(tmp_path / "sessions.sqlite3"), loader=loader)

    async def scenario(pilot: Pilot) -> None:
        await ready(pilot)
        await until(pilot, lambda: bool(notes(app)), what="the note")
        [note] = notes(app)
        assert note.startswith("hybrid(lookup+timed) drafts too slowly to pay here (model at ")
        assert "speculating with text lookup only; --no-cost-check asks it anyway" in note
        await send(pilot, "hello")
        await answered(pilot)
        assert views(app, "assistant")[-1].status == "done"

    drive(app, scenario)


# -- the command line -----------------------------------------------------------------------------------


def ds4spec_chat(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """`ds4spec chat` with stdin and stdout not a terminal, as in a script."""
    return subprocess.run([sys.executable, "-m", "ds4spec", "chat", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120, env={**os.environ, "DS4SPEC_HOME": str(home)})


def test_chat_sessions_lists_stored_sessions_and_resume_names_a_missing_one(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions.sqlite3")
    sid = store.new_session()
    store.add_message(sid, "user", "How do I reverse a list?")
    store.new_session()  # empty: never listed
    store.close()
    listed = ds4spec_chat("--sessions", home=tmp_path)
    assert listed.returncode == 0 and listed.stderr == ""
    assert len(listed.stdout.splitlines()) == 1
    assert listed.stdout.startswith(f"#{sid}") and "How do I reverse a list?  (1 message)" in listed.stdout
    missing = ds4spec_chat("--resume", "999", home=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr == "ds4spec: error: there is no session 999; `ds4spec chat --sessions` lists them\n"


def test_chat_outside_a_terminal_says_to_use_complete(tiny_bpe_gguf: Path, tmp_path: Path) -> None:
    proc = ds4spec_chat("--target", str(tiny_bpe_gguf), home=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "ds4spec: error: chat needs a terminal; in scripts use `ds4spec complete`\n"
