"""Tiny random-weight *transformers* models, saved like a Hub checkpoint, for the torch drafter's fast tests.

Why this exists: the torch drafter loads checkpoints with ``AutoModelForCausalLM`` / ``AutoTokenizer``, and
its fast tests must not download anything. This module builds a directory that those loaders read offline
(``config.json``, ``generation_config.json``, ``model.safetensors``, ``tokenizer.json``,
``tokenizer_config.json``, ``chat_template.jinja``) in about a second, with everything real except the
weights: a byte-level BPE that round-trips any UTF-8 text, ChatML and FIM special tokens, a chat template,
end-of-generation ids. As with :mod:`ds4spec.tinymodel`, the output is gibberish, so tests can check
plumbing, determinism and text handling, not acceptance rates.

The vocabulary deliberately differs from both tiny GGUF models: it is trained with GPT-2's pre-tokenizer
regex and a smaller merge budget, where the tiny ``"bpe"`` GGUF uses Qwen2's regex. A drafter built here
and a tiny GGUF target therefore split the same text into different tokens, as a real drafter of another
family does, so tests exercise the text-level bridge instead of an accidental id-for-id match.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tinymodel import CHATML_TEMPLATE, TRAINING_TEXT

if TYPE_CHECKING:
    import torch
    from tokenizers import Tokenizer
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

EOS_TOKEN: Final[str] = "<|endoftext|>"
IM_START_TOKEN: Final[str] = "<|im_start|>"
IM_END_TOKEN: Final[str] = "<|im_end|>"
FIM_TOKENS: Final[tuple[str, ...]] = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>")
SPECIAL_TOKENS: Final[tuple[str, ...]] = (EOS_TOKEN, IM_START_TOKEN, IM_END_TOKEN, *FIM_TOKENS)
"""Added after the learned vocabulary, in this order, like Qwen's: the ids are ``n_learned .. n_learned+6``."""

# Fewer merges than the tiny GGUF's 512 learned tokens, so that the two vocabularies differ in size too.
_LEARNED_VOCAB: Final[int] = 448


def _train_tokenizer() -> Tokenizer:
    """Train the byte-level BPE: every byte is a symbol, so any text encodes and decodes back exactly.

    GPT-2's split regex (``ByteLevel(use_regex=True)``), no prefix space, no normaliser and no
    post-processor: ``decode(encode(text)) == text`` for all text, and encoding never adds a token (no BOS,
    like Qwen). The special tokens are added after training so that they sit at the end of the vocabulary
    and the trainer never merges across them.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=_LEARNED_VOCAB,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator([TRAINING_TEXT], trainer=trainer)
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    return tokenizer


def _wrap_tokenizer(tokenizer: Tokenizer, chat_template: str | None) -> PreTrainedTokenizerFast:
    """The transformers view of the tokenizer: named EOS/PAD, the other specials as extra special tokens.

    ``clean_up_tokenization_spaces=False`` matters: with it on, ``decode`` rewrites ``"a , b"`` as
    ``"a, b"`` and code would not round-trip.
    """
    from transformers import PreTrainedTokenizerFast

    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=EOS_TOKEN,
        pad_token=EOS_TOKEN,
        extra_special_tokens=[t for t in SPECIAL_TOKENS if t != EOS_TOKEN],
        clean_up_tokenization_spaces=False,
        model_max_length=2048,
    )
    if chat_template is not None:
        wrapped.chat_template = chat_template
    return wrapped


def _init_weights(model: LlamaForCausalLM, generator: torch.Generator) -> None:
    """Overwrite every parameter with random values scaled like :func:`ds4spec.tinymodel._add_weights`.

    Explicit, rather than transformers' ``_init_weights``: that one may change between versions, and its
    ``std=0.02`` weights make greedy decoding loop (at this size: 15 to 34 distinct tokens per 50, one
    token up to 23 times), while these values depend on the seed alone. The scaling is the one measured for
    the tiny GGUF models: queries and keys 3x larger so attention is sharp, an output matrix minus the
    normalised embeddings so repeating the current token is unlikely, and logits a few units apart so
    near-ties are rare. Measured here over 6 seeds x 4 prompts x 50 greedy tokens: 45 distinct tokens on
    average, worst 39, none repeated more than 5 times (4 layers x 128 alike; 1 layer x 32: 40, worst 31).
    """
    import torch

    def normal(param: torch.Tensor, std: float) -> None:
        param.copy_(torch.randn(param.shape, generator=generator, dtype=torch.float32) * std)

    config = model.config
    n_embd, n_ff = config.hidden_size, config.intermediate_size
    proj = n_embd**-0.5
    with torch.no_grad():
        embed = model.model.embed_tokens.weight
        normal(embed, 1.0)
        for layer in model.model.layers:
            attn, mlp = layer.self_attn, layer.mlp
            layer.input_layernorm.weight.fill_(1.0)
            normal(attn.q_proj.weight, 3.0 * proj)
            normal(attn.k_proj.weight, 3.0 * proj)
            normal(attn.v_proj.weight, proj)
            normal(attn.o_proj.weight, proj)
            layer.post_attention_layernorm.weight.fill_(1.0)
            normal(mlp.gate_proj.weight, proj)
            normal(mlp.up_proj.weight, proj)
            normal(mlp.down_proj.weight, n_ff**-0.5)
        model.model.norm.weight.fill_(1.0)
        unit_embed = embed / embed.norm(dim=1, keepdim=True)
        normal(model.lm_head.weight, 0.5)
        model.lm_head.weight.sub_(2.0 * unit_embed)


def build_tiny_transformers_model(directory: Path, *, seed: int = 0, n_layer: int = 2, n_embd: int = 64,
                                  n_head: int = 4, chat_template: str | None = CHATML_TEMPLATE) -> Path:
    """A LlamaForCausalLM with random weights and a byte-level BPE tokenizer, saved with save_pretrained.

    ``directory`` must be absent or empty; the checkpoint is written to a sibling temporary directory and
    renamed into place, so a reader (a cached test fixture, say) never sees half a model. Returns
    ``directory``. The same arguments give the same files: the tokenizer trains deterministically and the
    weights come from a ``torch.Generator`` seeded with ``seed``, not from the global RNG, so a build
    neither depends on nor disturbs the caller's ``torch.manual_seed`` state. Weights are float32 in
    ``model.safetensors``; the feed-forward width is ``4 * n_embd``; ``<|endoftext|>`` is EOS and PAD, and
    generation stops at ``<|im_end|>`` or ``<|endoftext|>``, as with Qwen's instruct models.
    """
    if n_embd % n_head or (n_embd // n_head) % 2:
        raise ValueError("n_embd must split into n_head heads of even size (RoPE rotates pairs)")
    directory = Path(directory)
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise FileExistsError(f"{directory} exists and is not an empty directory")

    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    tokenizer = _wrap_tokenizer(_train_tokenizer(), chat_template)
    eos_id = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    im_end_id = tokenizer.convert_tokens_to_ids(IM_END_TOKEN)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=n_embd,
        intermediate_size=4 * n_embd,
        num_hidden_layers=n_layer,
        num_attention_heads=n_head,
        num_key_value_heads=n_head,
        max_position_embeddings=2048,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
        dtype="float32",
    )
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):  # construction draws transformers' own init from the global RNG
        model = LlamaForCausalLM(config).to(torch.float32).eval()
    _init_weights(model, generator)
    model.generation_config = GenerationConfig(
        bos_token_id=None, eos_token_id=[im_end_id, eos_id], pad_token_id=eos_id, do_sample=False
    )

    directory.parent.mkdir(parents=True, exist_ok=True)
    # mkdir, not tempfile.mkdtemp: that one makes the checkpoint directory private (0700) whatever the umask.
    partial = directory.with_name(f".{directory.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.partial")
    partial.mkdir()
    try:
        model.save_pretrained(partial, safe_serialization=True)
        tokenizer.save_pretrained(partial)
        _check_saved(partial)
        if directory.exists():
            directory.rmdir()  # empty, checked above; os.replace cannot rename onto a directory on every OS
        os.replace(partial, directory)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return directory


def _check_saved(directory: Path) -> None:
    """Fail at build time, not in a test far away, if transformers changed what save_pretrained writes."""
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        if not (directory / name).is_file():
            raise RuntimeError(f"save_pretrained did not write {name} in {directory}")
    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type") != "llama":
        raise RuntimeError(f"unexpected model_type {config.get('model_type')!r} in {directory / 'config.json'}")
