"""The tiny GGUF models load, tokenize, and generate in the real llama-cpp-python.

llama_cpp is imported at module level on purpose: without a working build these tests must fail, not skip,
because every fast test of the decoder stands on these models.
"""

from __future__ import annotations

import ctypes
import hashlib
import itertools
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import gguf
import jinja2.sandbox
import llama_cpp
import numpy as np
import pytest
from llama_cpp import Llama
from tinymodel import CHATML_TEMPLATE, TRAINING_TEXT, build_tiny_gguf

import ds4spec

# Seen in training (é, ü, 日本語, 🙂, →) and unseen (🦀, Ω, ж): the unseen ones must go through byte tokens.
TEXT = 'Café über 日本語 🙂 → 🦀 Ωmega жук\n\tdef f(x):\n    return "naïve"  # done\n'
CRAB = "🦀".encode()

ATTR_CONTROL = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL
ATTR_BYTE = llama_cpp.LLAMA_TOKEN_ATTR_BYTE
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
FIM = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>")


def load(path: Path) -> Llama:
    return Llama(model_path=str(path), n_ctx=512, verbose=False)


@pytest.fixture(scope="module", params=["bpe", "spm"])
def llm(request: pytest.FixtureRequest, tiny_models: dict[str, Path]) -> Iterator[Llama]:
    model = load(tiny_models[request.param])
    yield model
    model.close()


@pytest.fixture(scope="module")
def bpe_llm(tiny_bpe_gguf: Path) -> Iterator[Llama]:
    model = load(tiny_bpe_gguf)
    yield model
    model.close()


@pytest.fixture(scope="module")
def spm_llm(tiny_spm_gguf: Path) -> Iterator[Llama]:
    model = load(tiny_spm_gguf)
    yield model
    model.close()


def vocab(llm: Llama) -> llama_cpp.llama_vocab_p:
    return llama_cpp.llama_model_get_vocab(llm.model)


def piece(llm: Llama, token: int) -> bytes:
    """The token's stored text (``Ġ``/``▁``/``<0xF0>`` spelling), not its detokenized bytes."""
    return llama_cpp.llama_vocab_get_text(vocab(llm), token)


def c_detokenize(llm: Llama, tokens: list[int], remove_special: bool = False) -> bytes:
    """llama.cpp's own llama_detokenize: it treats the SPM leading space unlike Llama.detokenize."""
    buf = ctypes.create_string_buffer(4096)
    array = (llama_cpp.llama_token * len(tokens))(*tokens)
    n = llama_cpp.llama_detokenize(vocab(llm), array, len(tokens), buf, len(buf), remove_special, False)
    assert 0 <= n <= len(buf)
    return buf.raw[:n]


def greedy(llm: Llama, prompt: bytes, n: int = 50) -> list[int]:
    tokens = llm.tokenize(prompt, add_bos=llama_cpp.llama_vocab_get_add_bos(vocab(llm)), special=True)
    return list(itertools.islice(llm.generate(tokens, temp=0.0, reset=True), n))


def test_bpe_model_round_trips_non_ascii_text(bpe_llm: Llama) -> None:
    tokens = bpe_llm.tokenize(TEXT.encode(), add_bos=False)
    assert bpe_llm.detokenize(tokens) == TEXT.encode()
    assert c_detokenize(bpe_llm, tokens) == TEXT.encode()
    # A multi-byte character spans several tokens, some of which are not valid UTF-8 on their own.
    crab = bpe_llm.tokenize(CRAB, add_bos=False)
    assert len(crab) > 1
    assert b"".join(bpe_llm.detokenize([t]) for t in crab) == CRAB
    assert any(not _is_utf8(bpe_llm.detokenize([t])) for t in crab)


def test_bpe_vocabulary_holds_all_256_byte_symbols(tiny_bpe_gguf: Path) -> None:
    field = gguf.GGUFReader(tiny_bpe_gguf).fields["tokenizer.ggml.tokens"]
    tokens = {bytes(field.parts[i]).decode() for i in field.data}
    assert set(_byte_level_alphabet()) <= tokens
    assert 300 <= len(tokens) <= 600


def test_bpe_tokenization_matches_the_trainer(bpe_llm: Llama, tiny_bpe_gguf: Path) -> None:
    """llama.cpp's "qwen2" pre-tokenizer splits text as the ``tokenizers`` trainer did."""
    from tinymodel import _QWEN2_SPLIT_REGEX
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    fields = gguf.GGUFReader(tiny_bpe_gguf).fields
    tokens, merges, types = (fields[f"tokenizer.ggml.{key}"] for key in ("tokens", "merges", "token_type"))
    texts = [bytes(tokens.parts[i]).decode() for i in tokens.data]
    normal = {t: i for i, t in enumerate(texts) if int(types.parts[types.data[i]][0]) == 1}
    merges = [bytes(merges.parts[i]).decode() for i in merges.data]
    hf = Tokenizer(models.BPE(normal, [tuple(m.split(" ")) for m in merges]))
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_QWEN2_SPLIT_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    for text in (TRAINING_TEXT, TEXT, "x = 123456 + it's  a\n\n\n   b"):
        assert bpe_llm.tokenize(text.encode(), add_bos=False) == hf.encode(text).ids


def test_spm_model_round_trips_non_ascii_text_with_byte_fallback(spm_llm: Llama) -> None:
    tokens = spm_llm.tokenize(TEXT.encode(), add_bos=True)
    assert tokens[0] == spm_llm.token_bos()
    assert spm_llm.detokenize(tokens) == TEXT.encode()
    # The unseen emoji falls back to its four UTF-8 bytes as <0xF0> <0x9F> <0xA6> <0x80>.
    crab = spm_llm.tokenize(CRAB, add_bos=False)
    byte_tokens = [t for t in crab if llama_cpp.llama_vocab_get_attr(vocab(spm_llm), t) & ATTR_BYTE]
    assert [piece(spm_llm, t) for t in byte_tokens] == [b"<0xF0>", b"<0x9F>", b"<0xA6>", b"<0x80>"]
    assert spm_llm.detokenize(byte_tokens) == CRAB


def test_spm_leading_space_is_removed_after_bos_in_python_and_without_bos_in_c(spm_llm: Llama) -> None:
    """llama.cpp prepends ``▁`` to SPM text; the two detokenize APIs disagree on when to take it off again."""
    with_bos = spm_llm.tokenize(b"x = 1", add_bos=True)
    without_bos = spm_llm.tokenize(b"x = 1", add_bos=False)
    assert with_bos[1:] == without_bos  # the dummy-prefix space is added either way
    assert spm_llm.detokenize(with_bos) == b"x = 1"
    assert spm_llm.detokenize(without_bos) == b" x = 1"
    assert c_detokenize(spm_llm, without_bos) == b"x = 1"
    assert c_detokenize(spm_llm, with_bos, remove_special=True) == b" x = 1"


def test_builds_are_byte_identical_for_same_seed(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    for kind, built in tiny_models.items():
        again = build_tiny_gguf(tmp_path / f"{kind}.gguf", tokenizer=kind)
        assert again.read_bytes() == built.read_bytes()
        other = build_tiny_gguf(tmp_path / f"{kind}-seed1.gguf", tokenizer=kind, seed=1)
        assert other.read_bytes() != built.read_bytes()
    # Another process with another hash seed: nothing may depend on dict or set order.
    script = (
        "import hashlib, sys; from pathlib import Path; from tinymodel import build_tiny_gguf\n"
        "for kind in ('bpe', 'spm'):\n"
        "    p = build_tiny_gguf(Path(sys.argv[1]) / (kind + '.gguf'), tokenizer=kind)\n"
        "    print(hashlib.sha256(p.read_bytes()).hexdigest())\n"
    )
    path = os.pathsep.join([str(Path(__file__).parent), str(Path(ds4spec.__file__).parent.parent)])
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": path}
    command = [sys.executable, "-c", script, str(tmp_path / "child")]
    child = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    expected = [hashlib.sha256(tiny_models[kind].read_bytes()).hexdigest() for kind in ("bpe", "spm")]
    assert child.stdout.split() == expected


def test_special_tokens_are_single_control_tokens(llm: Llama) -> None:
    v = vocab(llm)
    ids = {}
    for text in SPECIALS + FIM:
        tokens = llm.tokenize(text.encode(), add_bos=False, special=True)
        assert len(tokens) == 1, text
        ids[text] = tokens[0]
        assert llama_cpp.llama_vocab_get_attr(v, tokens[0]) & ATTR_CONTROL, text
        assert len(llm.tokenize(text.encode(), add_bos=False, special=False)) > 1  # as plain text: pieces
        assert llm.detokenize(tokens) == b""  # control tokens are not rendered by default
        assert llm.detokenize(tokens, special=True) == text.encode()
    assert llama_cpp.llama_vocab_eos(v) == ids["<|endoftext|>"]
    assert llama_cpp.llama_vocab_eot(v) == ids["<|im_end|>"]
    assert llama_cpp.llama_vocab_is_eog(v, ids["<|endoftext|>"])
    assert llama_cpp.llama_vocab_is_eog(v, ids["<|im_end|>"])
    assert not llama_cpp.llama_vocab_is_eog(v, ids["<|im_start|>"])
    is_spm = llama_cpp.llama_vocab_type(v) == llama_cpp.LLAMA_VOCAB_TYPE_SPM
    assert llama_cpp.llama_vocab_get_add_bos(v) == is_spm  # BPE like Qwen: no BOS; SPM like Llama: BOS
    if not is_spm:
        assert llama_cpp.llama_vocab_bos(v) == ids["<|endoftext|>"]


def test_fim_tokens_are_exposed(llm: Llama, tmp_path: Path) -> None:
    v = vocab(llm)
    getters = (llama_cpp.llama_vocab_fim_pre, llama_cpp.llama_vocab_fim_suf, llama_cpp.llama_vocab_fim_mid,
               llama_cpp.llama_vocab_fim_pad)
    for getter, text in zip(getters, FIM, strict=True):
        assert piece(llm, getter(v)) == text.encode()
    kind = "spm" if llama_cpp.llama_vocab_type(v) == llama_cpp.LLAMA_VOCAB_TYPE_SPM else "bpe"
    plain = load(build_tiny_gguf(tmp_path / "no-fim.gguf", tokenizer=kind, fim=False))
    try:
        assert all(getter(vocab(plain)) == llama_cpp.LLAMA_TOKEN_NULL for getter in getters)
        assert len(plain.tokenize(b"<|fim_prefix|>", add_bos=False, special=True)) > 1
        assert len(plain.tokenize(b"<|im_end|>", add_bos=False, special=True)) == 1
    finally:
        plain.close()


def test_chat_template_is_stored_and_renders_chatml(llm: Llama, tmp_path: Path) -> None:
    assert llm.metadata["tokenizer.chat_template"] == CHATML_TEMPLATE
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    env = jinja2.sandbox.ImmutableSandboxedEnvironment()
    rendered = env.from_string(CHATML_TEMPLATE).render(messages=messages, add_generation_prompt=True)
    assert rendered == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    tokens = llm.tokenize(rendered.encode(), add_bos=False, special=True)
    im_start = llm.tokenize(b"<|im_start|>", add_bos=False, special=True)[0]
    assert tokens.count(im_start) == 3
    bare = build_tiny_gguf(tmp_path / "no-template.gguf", chat_template=None)
    assert "tokenizer.chat_template" not in gguf.GGUFReader(bare).fields


def test_greedy_generation_is_deterministic_and_varied(llm: Llama) -> None:
    prompts = (b"def main():\n", b"<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n")
    for prompt in prompts:
        first = greedy(llm, prompt)
        assert greedy(llm, prompt) == first
        assert len(first) == 50
        assert len(set(first)) >= 25, first  # measured: 39-49 distinct over many seeds and prompts
        assert max(len(list(run)) for _, run in itertools.groupby(first)) <= 3, first
    # The first greedy token is the argmax of the prompt's last logits row. (Llama.scores is not filled
    # unless logits_all=True in 0.3.36, so read the row from the context.)
    tokens = llm.tokenize(prompts[0], add_bos=llama_cpp.llama_vocab_get_add_bos(vocab(llm)))
    llm.reset()
    llm.eval(tokens)
    row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
    top2 = np.sort(row)[-2:]
    assert top2[1] - top2[0] > 1e-3  # no near-tie for kernels to flip
    assert int(row.argmax()) == greedy(llm, prompts[0], 1)[0]


def test_greedy_generation_is_identical_across_fresh_loads(tiny_models: dict[str, Path]) -> None:
    for path in tiny_models.values():
        runs = []
        for _ in range(2):
            model = load(path)
            try:
                runs.append(greedy(model, b"import os\n"))
            finally:
                model.close()
        assert runs[0] == runs[1]


def test_two_layer_model_builds_and_loads_in_under_a_second(tmp_path: Path) -> None:
    for kind in ("bpe", "spm"):
        start = time.perf_counter()
        path = build_tiny_gguf(tmp_path / f"{kind}.gguf", tokenizer=kind, n_layer=2)
        built = time.perf_counter()
        model = load(path)
        loaded = time.perf_counter()
        model.close()
        assert built - start < 1.0
        assert loaded - built < 1.0


def test_tests_run_with_an_isolated_ds4spec_home(isolated_home: Path) -> None:
    from ds4spec import paths

    assert os.environ["DS4SPEC_HOME"] == str(isolated_home)
    assert paths.data_dir() == isolated_home


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def _byte_level_alphabet() -> list[str]:
    """GPT-2's byte-to-unicode map: the 256 symbols a byte-level BPE needs so that any bytes tokenize."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    extra = [b for b in range(256) if b not in printable]
    return [chr(b) for b in printable] + [chr(256 + i) for i in range(len(extra))]
