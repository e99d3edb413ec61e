"""Model drafters on tiny models: llama.cpp (byte-level BPE and SentencePiece GGUF) and transformers (a model
directory and a GGUF file). What the engine relies on: a draft is the drafter's own greedy continuation of
exactly the committed text, syncing costs the same at any context length, and drafts hold no special tokens.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
import torch
from tinymodel import TRAINING_TEXT, build_tiny_gguf
from tinytorch import build_tiny_transformers_model

from ds4spec.backend.prompt import ChatMessage
from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.target_options import TargetOptions
from ds4spec.core.drafting import NO_DRAFT, DraftContext
from ds4spec.drafters.llama_drafter import LlamaDrafter
from ds4spec.drafters.model import ModelDrafter
from ds4spec.drafters.torch_drafter import TorchDrafter

KINDS = ["llama-bpe", "llama-spm", "torch-dir", "torch-gguf"]
PROMPT = "def fibonacci(n: int) -> list[int]:\n    result = [0, 1]\n"
# Code, accents, CJK, an emoji the tiny vocabularies split into byte tokens, a word cut by the prompt.
TEXT = ("def greet(name: str) -> str:\n    return f\"Grüße, {name} 🦀 日本語\"\n\n\nclass Counter:\n"
        "    def increment(self, step: int = 1) -> int:\n        self.value += step  # naïve → über\n").encode()
OWN_TEMPLATE = ("{% for m in messages %}### {{ m['role'] }} says:\n{{ m['content'] }}\n{% endfor %}"
                "{% if add_generation_prompt %}### assistant says:\n{% endif %}")

Factory = Callable[..., ModelDrafter]


@pytest.fixture(scope="module")
def tiny_torch_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_transformers_model(tmp_path_factory.mktemp("tiny-torch") / "tiny")


@pytest.fixture
def make(tiny_models: dict[str, Path], tiny_torch_dir: Path) -> Iterator[Factory]:
    """``make(kind, **options)``: a drafter on a tiny model, closed after the test. Unhealed unless asked: most
    tests here specify the model's greedy continuation of exactly the committed tokens."""
    opened: list[ModelDrafter] = []

    def factory(kind: str, p_min: float = 0.0, heal: bool = False, **options: object) -> ModelDrafter:
        backend, model = kind.split("-")
        if backend == "llama":
            drafter: ModelDrafter = LlamaDrafter(tiny_models[model], p_min=p_min, n_threads=1, heal=heal,
                                                 **options)
        else:
            source = tiny_torch_dir if model == "dir" else tiny_models["bpe"]
            drafter = TorchDrafter(source, device="cpu", p_min=p_min, n_threads=1, heal=heal, **options)
        opened.append(drafter)
        return drafter

    yield factory
    for drafter in opened:
        drafter.close()


def _greedy_reference(drafter: ModelDrafter, text: bytes, n: int) -> bytes:
    """A plain greedy run of the drafter's model, by its own library, cut at the first special token."""
    if isinstance(drafter, LlamaDrafter):
        with LlamaTarget(drafter.model.path, TargetOptions(n_ctx=512, n_threads=1)) as model:
            tok = model.tokenizer
            logits = model.eval_prompt(tok.tokenize(text, add_special=True))
            out = b""
            for _ in range(n):
                token = int(logits.argmax())
                if tok.is_eog(token) or tok.is_control(token):
                    break
                out += tok.piece(token)
                logits = model.eval_prompt([token])
            return out
    assert isinstance(drafter, TorchDrafter)
    tokenizer = drafter.tokenizer
    ids = torch.tensor([tokenizer.encode(text.decode())])
    # No min_new_tokens: it would mask end-of-generation tokens, which a greedy run must be free to pick.
    generated = drafter.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                                       do_sample=False)[0, ids.shape[1]:].tolist()
    special = set(tokenizer.all_special_ids)  # a GGUF-built tokenizer names only EOS here; FIM and chat markup
    special.update(i for i, added in tokenizer.added_tokens_decoder.items() if added.special)  # are added ones
    cut = next((i for i, t in enumerate(generated) if t in special), len(generated))
    return tokenizer.decode(generated[:cut]).encode()


def _text_of(drafter: ModelDrafter) -> bytes:
    """The bytes the drafter's tokens stand for after the prompt head (plus its pending bytes)."""
    sync = drafter._sync
    held = b"".join(map(sync.piece, sync.tokens[sync.fixed :]))
    return held.removeprefix(sync._region_dummy) + sync.pending


@pytest.mark.parametrize("kind", KINDS)
def test_draft_is_the_drafter_own_greedy_continuation(make: Factory, kind: str) -> None:
    drafter = make(kind)
    drafter.begin(DraftContext(text=PROMPT.encode()))
    draft = drafter.propose(12)
    assert draft.source == "model" and draft.drafter_tokens == len(draft.confidences) > 0
    expected = _greedy_reference(drafter, PROMPT.encode(), 12)
    if isinstance(drafter, TorchDrafter):  # decode() renders a cut UTF-8 character as U+FFFD
        assert draft.text.decode(errors="replace") == expected.decode()
    else:
        assert draft.text == expected
    assert all(0.0 < c <= 1.0 for c in draft.confidences)

    # Accepting the draft's text: what the drafter evaluated for the draft is reused, not evaluated again.
    before = len(drafter.tokens)
    evaluated, reused = drafter.stats.evaluated_tokens, drafter.stats.reused_tokens
    drafted = drafter.last_draft
    drafter.extend(draft.text)
    drafter.propose(1)
    new = drafter.tokens[before:]
    in_cache = drafted if draft.drafter_tokens < 12 else drafted[:-1]  # a draft of 12 did not evaluate its last
    kept = next((i for i, (a, b) in enumerate(zip(new, in_cache, strict=False)) if a != b),
                min(len(new), len(in_cache)))
    assert drafter.stats.reused_tokens - reused == kept
    if len(new) > kept:
        assert drafter.stats.evaluated_tokens - evaluated == len(new) - kept
    else:  # all found: at most the last token again, for its prediction
        assert drafter.stats.evaluated_tokens - evaluated <= 1


@pytest.mark.parametrize("kind", KINDS)
def test_extend_keeps_the_cache_in_sync_with_the_committed_text(make: Factory, kind: str) -> None:
    rng = random.Random(kind)
    drafter = make(kind)
    prompt, rest = TEXT[:23], TEXT[23:]  # the prompt ends inside a word
    drafter.begin(DraftContext(text=prompt))
    committed, pos = prompt, 0
    while pos < len(rest):
        step = rng.choice([1, 1, 2, 3, 5, 8])  # short steps land inside words and multi-byte characters
        chunk = rest[pos : pos + step]
        pos += step
        drafter.extend(chunk)
        committed += chunk
        assert _text_of(drafter) == committed
        if rng.random() < 0.3:
            drafter.propose(rng.randint(1, 4))  # draft tokens enter the cache and must be rolled back
    committed += "🙂".encode()[:2]  # end inside a character: those bytes stay pending
    drafter.extend("🙂".encode()[:2])
    assert drafter.pending == "🙂".encode()[:2]

    fresh = make(kind)
    fresh.begin(DraftContext(text=committed))
    assert drafter.tokens == fresh.tokens  # canonical: as if the whole text had been tokenized at once
    # The same greedy tokens; probabilities only up to rounding (the cache was filled in other batch sizes).
    ours, theirs = drafter.propose(6), fresh.propose(6)
    assert (ours.text, ours.drafter_tokens) == (theirs.text, theirs.drafter_tokens)
    assert ours.confidences == pytest.approx(theirs.confidences, abs=0.01)


@pytest.mark.parametrize("kind", KINDS)
def test_sync_cost_does_not_grow_with_the_text(make: Factory, kind: str) -> None:
    continuation = TEXT[: len(TEXT) // 2]
    filler = (TRAINING_TEXT.encode() * 2)[:5000]
    costs = {}
    for name, prompt in (("short", PROMPT.encode()), ("long", filler + b"\n\n" + PROMPT.encode())):
        drafter = make(kind, n_ctx=8192)
        drafter.begin(DraftContext(text=prompt))
        drafter.propose(2)
        stats, cycles = drafter.stats, []
        for start in range(0, len(continuation), 7):
            seen = (stats.tokenize_calls, stats.tokenized_bytes, stats.evaluated_tokens + stats.reused_tokens)
            drafter.extend(continuation[start : start + 7])
            drafter.propose(2)
            now = (stats.tokenize_calls, stats.tokenized_bytes, stats.evaluated_tokens + stats.reused_tokens)
            cycles.append(tuple(b - a for a, b in zip(seen, now, strict=True)))
        costs[name] = (len(drafter.tokens), cycles)
    assert costs["long"][0] > 1000 + costs["short"][0]
    assert costs["long"][1] == costs["short"][1]
    assert max(c[1] for c in costs["long"][1]) < 400  # bytes re-tokenized per cycle: a bounded tail


@pytest.mark.parametrize("kind", KINDS)
def test_p_min_stops_a_low_confidence_draft(make: Factory, kind: str) -> None:
    drafter = make(kind, p_min=1.0)
    drafter.begin(DraftContext(text=PROMPT.encode()))
    certain = drafter.propose(8)  # nothing is certain: only the first token, which is always proposed
    assert certain.drafter_tokens == len(certain.confidences) == 1 and certain.confidences[0] < 1.0
    drafter.p_min = 0.0
    assert drafter.propose(8).drafter_tokens == 8
    drafter.p_min = 0.5
    draft = drafter.propose(8)
    assert all(c >= 0.5 for c in draft.confidences[1:])


@pytest.mark.parametrize("kind", KINDS)
def test_a_draft_stops_at_the_first_token_that_is_enough(make: Factory, kind: str) -> None:
    """Told when its text is enough, a model stops there: each of its tokens is a forward pass."""
    drafter = make(kind)
    drafter.begin(DraftContext(text=PROMPT.encode()))
    full = drafter.propose(12)
    asked: list[bytes] = []

    def enough(text: bytes) -> bool:
        asked.append(text)
        return len(text) >= 6

    drafter.begin(DraftContext(text=PROMPT.encode()))
    short = drafter.propose_until(12, enough)
    assert full.text.startswith(short.text) and len(short.text) >= 6
    assert short.drafter_tokens < full.drafter_tokens
    assert asked[-1] == short.text and all(len(text) < 6 for text in asked[:-1])
    assert len(asked) == short.drafter_tokens  # consulted once a token, and the last token was enough


@pytest.mark.parametrize("kind", KINDS)
def test_a_draft_stops_before_a_token_the_policy_does_not_take(make: Factory, kind: str) -> None:
    """Asked before each token after the first, with the probabilities of the draft's tokens and then the next
    one's, ``worth`` ends the draft where it says no; ``ends`` marks where each of the drafter's tokens ends."""
    drafter = make(kind)
    drafter.p_min = 0.0
    drafter.begin(DraftContext(text=PROMPT.encode()))
    full = drafter.propose(12)
    asked: list[list[float]] = []

    def worth(confidences: Sequence[float]) -> bool:
        asked.append(list(confidences))
        return len(confidences) <= 3

    drafter.begin(DraftContext(text=PROMPT.encode()))
    short = drafter.propose_until(12, lambda text: False, worth=worth)
    assert short.drafter_tokens == 3 and full.text.startswith(short.text)
    assert [len(c) for c in asked] == [2, 3, 4]  # never asked for the first token
    assert asked[-1][:3] == list(short.confidences) == list(full.confidences[:3])
    assert len(short.ends) == 3 and list(short.ends) == sorted(short.ends) and short.ends[-1] == len(short.text)
    assert list(full.ends[:3]) == list(short.ends)


@pytest.mark.parametrize("kind", ["llama-bpe", "llama-spm", "torch-dir"])
def test_chat_mode_renders_the_drafter_own_template(make: Factory, kind: str, tmp_path: Path) -> None:
    if kind == "torch-dir":
        source = build_tiny_transformers_model(tmp_path / "own", chat_template=OWN_TEMPLATE)
        drafter: ModelDrafter = TorchDrafter(source, device="cpu", p_min=0.0, n_threads=1)
        piece, render = drafter._piece, drafter.tokenizer.decode
    else:
        source = build_tiny_gguf(tmp_path / "own.gguf", tokenizer=kind[6:], chat_template=OWN_TEMPLATE)
        drafter = LlamaDrafter(source, p_min=0.0, n_threads=1)
        piece = drafter.model.tokenizer.piece

        def render(tokens: list[int]) -> str:
            return drafter.model.tokenizer.detokenize(tokens, special=True).decode()

    messages = [ChatMessage("system", "Be brief."), ChatMessage("user", "Stop<|im_end|><|im_start|> here?")]
    drafter.begin(DraftContext(messages=messages))
    prompt = drafter.tokens
    # Spaces normalised: chat_tokens tokenizes markup and contents separately, and a SentencePiece vocabulary
    # then puts its dummy-prefix space before each part.
    rendered = " ".join(render(prompt).split())
    assert rendered.endswith("### user says: Stop<|im_end|><|im_start|> here? ### assistant says:")
    assert "### system says: Be brief. ###" in rendered
    assert not any(drafter._is_stop(t) for t in prompt[1:])  # the user's markup stayed text
    assert drafter.propose(4).drafter_tokens > 0
    drafter.extend("Sure: naïve".encode())
    assert drafter.tokens[: len(prompt)] == prompt
    assert b"".join(map(piece, drafter.tokens[len(prompt) :])) == "Sure: naïve".encode()
    drafter.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_draft_never_contains_special_tokens_text(make: Factory, kind: str) -> None:
    """Greedy runs of the random models reach an end-of-generation token now and then: find such a prompt,
    and check that the draft stops right before it."""
    drafter = make(kind)
    stops = 0
    for start in range(0, 2000, 97):
        prompt = TRAINING_TEXT[start : start + 60].encode()
        drafter.begin(DraftContext(text=prompt))
        draft = drafter.propose(40)
        assert b"<|" not in draft.text and b"<s>" not in draft.text
        if draft is NO_DRAFT or draft.drafter_tokens < 40:  # with p_min = 0, only a special token stops it
            stops += 1
            expected = _greedy_reference(drafter, prompt, 40)
            assert draft.text.decode(errors="replace") == expected.decode(errors="replace")
    assert stops >= 1


@pytest.mark.parametrize(("draft_threads", "cores", "expected"), [
    (1, 2, 1),  # named: as named
    (None, 2, 2),  # no core to spare: it takes turns with the target on its thread, with the target's threads
    (None, 8, 1),  # cores to spare: one, beside the target
])
def test_draft_threads_follow_where_the_drafter_runs(
        tiny_torch_dir: Path, tiny_spm_gguf: Path, draft_threads: int | None, cores: int, expected: int,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A llama.cpp drafter's threads follow where it runs (docs/usage.md, --draft-threads); torch's stay one."""
    from ds4spec.drafters.factory import build_drafter
    from ds4spec.engine import loading
    from ds4spec.engine.settings import Settings

    monkeypatch.setattr(loading, "available_cores", lambda: cores)
    before = torch.get_num_threads()
    try:
        for model in (str(tiny_torch_dir), str(tiny_spm_gguf)):
            settings = Settings(draft=model, draft_threads=draft_threads, threads=2, gpu_layers=0)
            drafter = build_drafter(loading.drafter_spec(settings), loading.locate_model)
            assert drafter is not None
            if isinstance(drafter, TorchDrafter):  # its own OpenMP runtime: one thread unless named
                assert torch.get_num_threads() == (draft_threads or 1)
            else:
                assert isinstance(drafter, LlamaDrafter) and drafter.model.n_threads == expected
            drafter.close()
            guard = loading.load_drafter(settings)
            assert guard is not None and guard.inline == (cores == 2) and guard.background == (cores == 8)
            guard.close()
    finally:
        torch.set_num_threads(before)


def _next_logits(drafter: ModelDrafter, reference: LlamaTarget | None, tokens: list[int]) -> np.ndarray:
    """The logits after ``tokens``, by the drafter model's own library, from an empty context."""
    if reference is not None:
        reference.reset()
        return reference.eval_prompt(tokens)
    assert isinstance(drafter, TorchDrafter)
    with torch.inference_mode():
        return drafter.model(input_ids=torch.tensor([tokens])).logits[0, -1].float().numpy()


def _healed_reference(drafter: ModelDrafter, reference: LlamaTarget | None, tokens: list[int], n: int) -> bytes:
    """Token healing spelled out: the last token chosen again among the tokens its bytes begin (unless it ends in
    a space or a tab), by the logits before it; then greedy. The draft is what comes after the committed bytes,
    ``n`` tokens of the model's, the chosen one among them where it is not the committed one."""
    last = drafter._piece(tokens[-1])
    candidates = [t for t in range(drafter.n_vocab) if drafter._piece(t).startswith(last) and not drafter._is_stop(t)]
    if last.endswith((b" ", b"\t")):  # spaces are not healed: the target ended them, and the indentation with them
        candidates = [tokens[-1]]
    logits = _next_logits(drafter, reference, tokens[:-1])
    chosen = max(candidates, key=lambda t: logits[t])
    context, out = [*tokens[:-1], chosen], drafter._piece(chosen)[len(last) :]
    for _ in range(n - (chosen != tokens[-1])):
        token = int(np.argmax(_next_logits(drafter, reference, context)))
        if drafter._is_stop(token):
            break
        context.append(token)
        out += drafter._piece(token)
    return out


@pytest.mark.parametrize("kind", ["llama-bpe", "llama-spm", "torch-dir"])
def test_a_healed_draft_chooses_the_last_token_again_from_the_logits_before_it(make: Factory, kind: str) -> None:
    drafter = make(kind, heal=True)
    unhealed = make(kind)
    reference = None
    if isinstance(drafter, LlamaDrafter):
        reference = LlamaTarget(drafter.model.path, TargetOptions(n_ctx=512, n_threads=1))
    changed = 0
    for cut in range(40, 160, 3):  # texts ending in words, inside words, in newlines and indentation
        text = TEXT[:cut]
        if text.decode(errors="ignore").encode() != text:
            continue  # ends inside a character: nothing is healed
        drafter.begin(DraftContext(text=text))
        unhealed.begin(DraftContext(text=text))
        healed, plain = drafter.propose(3), unhealed.propose(3)
        assert drafter.tokens == unhealed.tokens  # healing never changes what the drafter holds as committed
        expected = _healed_reference(drafter, reference, drafter.tokens, 3)
        assert healed.text == expected, (text, healed.text, expected)
        changed += healed.text != plain.text
    if reference is not None:
        reference.close()
    assert changed >= 2, "some cut must end in a token the model would not have ended it with"


@pytest.mark.parametrize("kind", ["llama-bpe", "llama-spm", "torch-dir"])
def test_healing_adds_no_forward_pass(make: Factory, kind: str) -> None:
    """As the loop drives it: a draft, part of it committed, then the target's own bytes. Healed or not, a cycle
    takes one pass to catch up and one for each drafted token after the first (and one that shows a draft its
    end), at most: the row before the last token comes from the last draft's passes or the catch-up's own."""
    drafts: dict[bool, list[bytes]] = {}
    for heal in (False, True):
        drafter = make(kind, heal=heal)
        forward = drafter._forward
        calls = [0]

        def counted(tokens: list[int], rows: int, forward: Callable[..., np.ndarray] = forward,
                    calls: list[int] = calls) -> np.ndarray:
            calls[0] += 1
            return forward(tokens, rows)

        drafter._forward = counted  # type: ignore[method-assign]
        rng = random.Random(7)
        drafter.begin(DraftContext(text=TEXT[:30]))
        pos, drafts[heal] = 30, []
        while pos < len(TEXT) - 8:
            before = calls[0]
            if pos % 2:
                drafter.prepare()  # as a guard that times the catch-up apart from the draft calls it
            draft = drafter.propose(3)
            stopped = draft.drafter_tokens < 3  # the pass that showed an end-of-generation token next
            assert calls[0] - before <= max(1, draft.drafter_tokens + stopped), (heal, pos)
            drafts[heal].append(draft.text)
            step = rng.choice([1, 2, 3, 5, 8])
            drafter.extend(TEXT[pos : pos + step])
            pos += step
    assert sum(a != b for a, b in zip(drafts[True], drafts[False], strict=True)) >= 5


@pytest.mark.parametrize("argv", [["complete"], ["complete", "--no-heal"], ["serve", "--no-heal"]])
def test_no_heal_reaches_the_model_drafter(argv: list[str], tiny_spm_gguf: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from ds4spec.cli import build_parser
    from ds4spec.drafters.factory import build_drafter
    from ds4spec.engine import loading
    from ds4spec.engine.options import settings_from_args

    monkeypatch.setenv("DS4SPEC_CONFIG", str(tmp_path / "absent.toml"))
    settings = settings_from_args(build_parser().parse_args([*argv, "--draft", str(tiny_spm_gguf)]))
    drafter = build_drafter(loading.drafter_spec(settings), loading.locate_model)
    assert isinstance(drafter, LlamaDrafter) and drafter.heal is ("--no-heal" not in argv)
    drafter.close()
