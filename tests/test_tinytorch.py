"""The tiny transformers models load offline, generate, tokenize any text exactly, and build reproducibly.

Also pins what the torch drafter may rely on later: transformers loads the tiny GGUF files themselves
(``gguf_file=``), with llama.cpp's tokenization and, up to llama.cpp's f16 KV cache, its logits.
Every load passes ``local_files_only=True`` and runs with sockets disabled, so a test that tried the network
fails instead of hanging or passing by download.
"""

from __future__ import annotations

import collections
import socket
from collections.abc import Iterator
from pathlib import Path

import llama_cpp
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file
from tinymodel import CHATML_TEMPLATE, TRAINING_TEXT
from tinytorch import (
    EOS_TOKEN,
    FIM_TOKENS,
    IM_END_TOKEN,
    IM_START_TOKEN,
    SPECIAL_TOKENS,
    build_tiny_transformers_model,
)
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.target_options import TargetOptions

# Seen in training (é, 日本語, 🙂) and unseen (🦀, Ω, ж), spaces before punctuation that a "clean up" would eat.
TEXT = 'Café über 日本語 🙂 → 🦀 Ωmega жук\n\tdef f(x) :\n    return "naïve" , 1  # done\r\n'
PROMPT = "def fibonacci(n: int) -> list[int]:\n"


def _refuse_network(*args: object, **kwargs: object) -> None:
    raise AssertionError("a tiny model tried to use the network")


@pytest.fixture(scope="module")
def offline() -> Iterator[None]:
    """Sockets cannot connect while the module's models are built and loaded (local_files_only is not enough
    proof alone: it only covers the calls that were given it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", _refuse_network)
        patch.setattr(socket, "create_connection", _refuse_network)
        yield


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory, offline: None) -> Path:
    return build_tiny_transformers_model(tmp_path_factory.mktemp("tiny-torch") / "tiny")


@pytest.fixture(scope="module")
def tokenizer(tiny_dir: Path) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(tiny_dir, local_files_only=True)


@pytest.fixture(scope="module")
def model(tiny_dir: Path) -> PreTrainedModel:
    return AutoModelForCausalLM.from_pretrained(tiny_dir, local_files_only=True).eval()


def _greedy(model: PreTrainedModel, ids: list[int], n: int) -> list[int]:
    """n greedy tokens; min_new_tokens keeps end-of-generation tokens from cutting the run short."""
    out = model.generate(torch.tensor([ids]), max_new_tokens=n, min_new_tokens=n, do_sample=False)
    return out[0, len(ids):].tolist()


def test_tiny_transformers_model_loads_offline_and_generates_deterministically(
    tiny_dir: Path, tokenizer: PreTrainedTokenizerBase, model: PreTrainedModel
) -> None:
    assert sorted(p.name for p in tiny_dir.iterdir()) == [
        "chat_template.jinja", "config.json", "generation_config.json", "model.safetensors",
        "tokenizer.json", "tokenizer_config.json",
    ]
    assert not list(tiny_dir.parent.glob(".*.partial")), "the temporary build directory was left behind"
    config = model.config
    assert type(model).__name__ == "LlamaForCausalLM"
    assert config.vocab_size == len(tokenizer)
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (2, 64, 4)
    assert config.max_position_embeddings == 2048
    assert config.tie_word_embeddings is False
    assert model.dtype == torch.float32
    assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()

    ids = tokenizer.encode(PROMPT)
    first = _greedy(model, ids, 32)
    assert _greedy(model, ids, 32) == first
    again = AutoModelForCausalLM.from_pretrained(tiny_dir, local_files_only=True).eval()
    assert _greedy(again, ids, 32) == first
    # Random weights scaled so that greedy output wanders, as a drafter's would, instead of looping.
    assert len(set(first)) >= 20, first
    assert collections.Counter(first).most_common(1)[0][1] <= 6, first


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_tokenizer_round_trips_non_ascii_text(tokenizer: PreTrainedTokenizerBase, text: str) -> None:
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == text
    assert tokenizer.encode(text) == ids  # nothing added: no BOS, like Qwen


@pytest.mark.parametrize("text", [TEXT, TRAINING_TEXT, "é", "日本語", "🙂", " ", "a , b", "\n\n\t \r\n", ""])
def test_tokenizer_round_trips_non_ascii_text_examples(tokenizer: PreTrainedTokenizerBase, text: str) -> None:
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == text
    assert tokenizer.decode(ids, skip_special_tokens=True) == text


def test_tokenizer_splits_unseen_characters_into_byte_tokens(tokenizer: PreTrainedTokenizerBase) -> None:
    """Multi-byte characters spread over several tokens are a hazard the drafter must survive: make sure
    the tiny tokenizer has them."""
    ids = tokenizer.encode("🦀", add_special_tokens=False)  # F0 9F A6 80: F0 9F is a merge (from 🙂), A6 80 not
    assert len(ids) >= 2
    assert all("\ufffd" in tokenizer.decode([i]) for i in ids)


def test_builds_are_identical_for_the_same_seed(tmp_path: Path, tiny_dir: Path, offline: None) -> None:
    rng_before = torch.get_rng_state()
    again = build_tiny_transformers_model(tmp_path / "again", seed=0)
    other = build_tiny_transformers_model(tmp_path / "other", seed=1)
    assert torch.equal(torch.get_rng_state(), rng_before), "a build must not move the caller's torch RNG"

    weights, same, different = (load_file(d / "model.safetensors") for d in (tiny_dir, again, other))
    assert weights.keys() == same.keys() == different.keys()
    assert all(torch.equal(weights[k], same[k]) for k in weights)
    assert not any(torch.equal(weights[k], different[k]) for k in weights if "norm" not in k)
    for path in tiny_dir.iterdir():
        assert (again / path.name).read_bytes() == path.read_bytes(), path.name
    # The tokenizer does not depend on the seed.
    assert (other / "tokenizer.json").read_bytes() == (tiny_dir / "tokenizer.json").read_bytes()

    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        build_tiny_transformers_model(tmp_path / "busy")
    assert (tmp_path / "busy" / "keep.txt").read_text() == "mine"


def test_special_tokens_are_single_tokens_and_chat_template_renders(
    tmp_path: Path, tiny_dir: Path, tokenizer: PreTrainedTokenizerBase, model: PreTrainedModel, offline: None
) -> None:
    ids = [tokenizer.encode(t, add_special_tokens=False) for t in SPECIAL_TOKENS]
    assert all(len(i) == 1 for i in ids), ids
    # Last in the vocabulary, in order, as in Qwen's.
    assert [i[0] for i in ids] == list(range(len(tokenizer) - len(SPECIAL_TOKENS), len(tokenizer)))
    assert set(tokenizer.all_special_tokens) == set(SPECIAL_TOKENS)
    assert (tokenizer.eos_token, tokenizer.pad_token, tokenizer.bos_token) == (EOS_TOKEN, EOS_TOKEN, None)
    eos_id, im_start_id, im_end_id = tokenizer.convert_tokens_to_ids([EOS_TOKEN, IM_START_TOKEN, IM_END_TOKEN])
    assert model.config.eos_token_id == eos_id
    assert model.generation_config.eos_token_id == [im_end_id, eos_id]
    fim = "".join(FIM_TOKENS)
    assert tokenizer.decode(tokenizer.encode(fim)) == fim
    assert tokenizer.decode(tokenizer.encode(fim), skip_special_tokens=True) == ""

    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Café → 🙂?"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nCafé → 🙂?<|im_end|>\n<|im_start|>assistant\n"
    )
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
    assert ids == tokenizer.encode(text)
    assert ids.count(im_start_id) == 3 and ids.count(im_end_id) == 2
    assert tokenizer.chat_template == CHATML_TEMPLATE

    plain = build_tiny_transformers_model(tmp_path / "no-template", chat_template=None)
    assert AutoTokenizer.from_pretrained(plain, local_files_only=True).chat_template is None
    assert not (plain / "chat_template.jinja").exists()


def test_transformers_loads_the_tiny_gguf_with_the_same_logits_as_llama_cpp(
    tiny_bpe_gguf: Path, tokenizer: PreTrainedTokenizerBase, offline: None
) -> None:
    """transformers' GGUF path (dequantise, un-permute Q/K for its RoPE layout, rebuild the tokenizer from
    the GGUF vocabulary and merges) reproduces llama.cpp on the tiny model. LlamaTarget keeps its KV cache
    in f16, which moves logits of magnitude ~20 by up to ~0.04; with an f32 cache they agree to ~3e-5."""
    directory, name = tiny_bpe_gguf.parent, tiny_bpe_gguf.name
    hf_tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=name, local_files_only=True)
    hf_model = AutoModelForCausalLM.from_pretrained(
        directory, gguf_file=name, dtype=torch.float32, local_files_only=True
    ).eval()
    assert type(hf_model).__name__ == "LlamaForCausalLM"

    with LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=256, n_gpu_layers=0)) as target:
        assert hf_model.config.vocab_size == target.n_vocab == len(hf_tokenizer)
        for text in (TEXT, TRAINING_TEXT):
            expected = target.tokenizer.tokenize(text.encode())
            assert hf_tokenizer.encode(text, add_special_tokens=False) == expected
            assert hf_tokenizer.decode(expected) == text
            # The tiny drafter's own vocabulary is another one (GPT-2 regex, fewer merges), on purpose.
            assert tokenizer.encode(text) != expected
        chat = "<|im_start|>user\nCafé<|im_end|>\n<|fim_prefix|>x<|fim_suffix|><|fim_middle|><|endoftext|>"
        assert hf_tokenizer.encode(chat, add_special_tokens=False) == target.tokenizer.tokenize(
            chat.encode(), parse_special=True
        )

        tokens = target.tokenizer.tokenize(TEXT.encode())
        assert len(tokens) > 30
        llama_logits = target.eval_span(tokens)
    with torch.no_grad():
        torch_logits = hf_model(torch.tensor([tokens])).logits[0].numpy()
    assert torch_logits.shape == llama_logits.shape
    assert np.mean(torch_logits.argmax(1) == llama_logits.argmax(1)) >= 0.9
    np.testing.assert_allclose(torch_logits, llama_logits, rtol=0, atol=0.1)

    # With an f32 KV cache the remaining difference is float rounding: the weights and graph are the same.
    exact = llama_cpp.Llama(
        model_path=str(tiny_bpe_gguf), n_ctx=256, n_gpu_layers=0, logits_all=True, verbose=False,
        type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32,
    )
    try:
        exact.eval(tokens)
        f32_logits = np.asarray(exact.scores[: len(tokens)], dtype=np.float32)
    finally:
        exact.close()
    np.testing.assert_allclose(torch_logits, f32_logits, rtol=0, atol=1e-3)
    assert np.array_equal(torch_logits.argmax(1), f32_logits.argmax(1))
