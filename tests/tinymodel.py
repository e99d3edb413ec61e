"""Tiny random-weight GGUF models that load and generate in llama-cpp-python.

Why this exists: the fast test tier and ``ds4spec doctor`` need real models that llama.cpp evaluates
(real tokenizers, real special tokens, real forward passes) without a download and in milliseconds. The
weights are random, so the text they generate is gibberish, but everything around it is real: tokenization
of any UTF-8 text, multi-byte characters split over several tokens, ChatML and FIM special tokens,
end-of-generation detection.

Gibberish has two properties tests must allow for: greedy output is often non-canonical (the model emits
``"a" + "b"`` where the tokenizer would produce ``"ab"``, so re-tokenized text differs from the emitted
ids), and it often stops inside a multi-byte character. Both are hazards the speculative decoder must
survive, so they are useful here; acceptance-rate claims need a real model instead.

Two tokenizer families are built, because ds4spec meets both kinds of vocabulary in the wild:

* ``"bpe"``: a GPT-2 style byte-level BPE (``tokenizer.ggml.model = "gpt2"``) like Qwen's, trained with
  the ``tokenizers`` library using Qwen2's pre-tokenizer regex and stored with ``tokenizer.ggml.pre =
  "qwen2"``, so llama.cpp splits text exactly as the trainer did. ``"default"`` also loads, but then
  llama.cpp sets ``clean_spaces`` and ``llama_detokenize`` turns ``"a , b"`` into ``"a, b"``: text
  would not round-trip.
* ``"spm"``: a SentencePiece BPE with byte fallback (``tokenizer.ggml.model = "llama"``) like Llama 2's,
  trained in memory with the ``sentencepiece`` package. llama.cpp prepends a space (``▁``) to every text
  it tokenizes, with or without BOS. Which call removes it again differs: ``Llama.detokenize`` (Python)
  strips one leading space only when the first token is BOS, ``llama_detokenize`` (C) only when the first
  token is not BOS. So ``Llama.detokenize(Llama.tokenize(t, add_bos=True)) == t``, and ids detokenized
  without BOS through the Python API keep the space.

Builds are deterministic (same arguments, byte-identical file) and take a few tens of milliseconds.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Final, Literal

import gguf
import numpy as np

TokenizerKind = Literal["bpe", "spm"]

CHATML_TEMPLATE: Final[str] = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- endif %}"
)
"""ChatML as Qwen writes it (less Qwen's default system message): the chat layout of ds4spec's targets."""

# The corpus both tokenizers learn from: code in the languages a coding assistant sees, markdown, and
# non-ASCII text, so that the vocabularies contain merges for common code fragments while multi-byte
# characters still span several byte tokens (BPE) or fall back to bytes (SPM) often enough for tests.
TRAINING_TEXT: Final[str] = '''\
# ds4spec: speculative decoding for code

A small **drafter** proposes text; the large *target* checks it in one pass.

## Install

```bash
pip install ds4spec
ds4spec doctor
```

- Fast on code: `if __name__ == "__main__":` and closing brackets.
- Works with any tokenizer → text is the common ground.
- Café, naïve, über, Grüße, señor, déjà vu: accents must survive.
- 日本語のテキストも正しく扱えます。中文也可以。
- Emoji too 🙂 🚀 ✨ and arrows ← → ↑ ↓, math: α + β ≤ γ, 10 °C, 5 €.

import os
import sys
from pathlib import Path


def read_lines(path: Path) -> list[str]:
    """Return the lines of a text file, without their newlines."""
    with open(path, encoding="utf-8") as handle:
        return [line.rstrip("\\n") for line in handle]


class Counter:
    def __init__(self, start: int = 0) -> None:
        self.value = start

    def increment(self, step: int = 1) -> int:
        self.value += step
        return self.value

    def __repr__(self) -> str:
        return f"Counter(value={self.value})"


def fibonacci(n: int) -> list[int]:
    result = [0, 1]
    for i in range(2, n):
        result.append(result[i - 1] + result[i - 2])
    return result[:n]


def main() -> int:
    counter = Counter()
    for name in sys.argv[1:]:
        if os.path.exists(name):
            lines = read_lines(Path(name))
            counter.increment(len(lines))
        else:
            print(f"error: {name} not found", file=sys.stderr)
            return 1
    print(counter)
    return 0


if __name__ == "__main__":
    sys.exit(main())

// JavaScript
export function debounce(fn, delay = 100) {
  let timer = null;
  return function (...args) {
    clearTimeout(timer);
    timer = setTimeout(() => fn.apply(this, args), delay);
  };
}

const users = [
  { id: 1, name: "Zoë", email: "zoe@example.com" },
  { id: 2, name: "José", email: "jose@example.com" },
];

async function fetchJson(url) {
  const response = await fetch(url);
  if (!response.ok) {
    throw new Error(`HTTP ${response.status}`);
  }
  return response.json();
}

for (const user of users) {
  console.log(`${user.id}: ${user.name} <${user.email}>`);
}

| name | value | note |
| ---- | ----- | ---- |
| alpha | 0.5 | first |
| beta | 1.25 | second → third |

def test_counter_increments():
    counter = Counter(10)
    assert counter.increment() == 11
    assert counter.increment(5) == 16


def parse_config(text: str) -> dict[str, str]:
    config: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition("=")
        config[key.strip()] = value.strip()
    return config

# Ünïcödé everywhere: Ölçü, Straße, façade, 東京, 🙂🙂, “quotes” and ‘single’ — dashes… done.
'''  # noqa: RUF001

# Qwen2's pre-tokenizer regex, as in its tokenizer.json; llama.cpp applies the same one for pre = "qwen2".
_QWEN2_SPLIT_REGEX: Final[str] = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

_BPE_LEARNED_VOCAB: Final[int] = 512
_SPM_VOCAB: Final[int] = 600

# GGUF token types, as llama.cpp reads them (llama_token_type).
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6

_EOS = "<|endoftext|>"
_IM_START = "<|im_start|>"
_IM_END = "<|im_end|>"
_FIM_TOKENS: Final[tuple[str, ...]] = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>")


class _Vocab:
    """A tokenizer ready for GGUF: pieces, types, optional scores and merges, ids of special tokens."""

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.types: list[int] = []
        self.scores: list[float] | None = None
        self.merges: list[str] | None = None
        self.special: dict[str, int] = {}
        self.bos_id = -1
        self._ids: dict[str, int] = {}

    def add(self, piece: str, kind: int, score: float = 0.0) -> int:
        """Append one piece; a duplicate would break llama.cpp's loader (text -> id must be one-to-one)."""
        if piece in self._ids:
            raise ValueError(f"duplicate token {piece!r}")
        self._ids[piece] = len(self.tokens)
        self.tokens.append(piece)
        self.types.append(kind)
        if self.scores is not None:
            self.scores.append(score)
        if kind in (_CONTROL, _USER_DEFINED, _UNKNOWN):
            self.special[piece] = len(self.tokens) - 1
        return len(self.tokens) - 1


def _special_pieces(fim: bool) -> list[str]:
    """ChatML markers always, FIM markers on request (Qwen2.5-Coder has them; many drafters do not)."""
    return [_IM_START, _IM_END, *(_FIM_TOKENS if fim else ())]


def _bpe_vocab(fim: bool) -> _Vocab:
    """Byte-level BPE like Qwen's: 256 byte symbols, learned merges, then the special tokens at the end."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=_BPE_LEARNED_VOCAB,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte, so that any text tokenizes
    )
    tokenizer.train_from_iterator([TRAINING_TEXT], trainer=trainer)
    model = json.loads(tokenizer.to_str())["model"]
    by_id = sorted(model["vocab"].items(), key=lambda item: item[1])
    if [i for _, i in by_id] != list(range(len(by_id))):
        raise RuntimeError("tokenizers returned a vocabulary with gaps")

    vocab = _Vocab()
    for piece, _ in by_id:
        vocab.add(piece, _NORMAL)
    vocab.merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    for piece in [_EOS, *_special_pieces(fim)]:
        vocab.add(piece, _CONTROL)
    vocab.bos_id = vocab.special[_EOS]  # like Qwen: BOS = EOS = <|endoftext|>, and add_bos is false
    return vocab


def _spm_vocab(fim: bool) -> _Vocab:
    """SentencePiece BPE with byte fallback, laid out like Llama 2's: <unk>, <s>, EOS, specials, bytes."""
    import sentencepiece as spm

    # One "sentence" per paragraph: sentencepiece caps sentence length; newlines inside one are kept.
    paragraphs = [p for p in TRAINING_TEXT.split("\n\n") if p.strip()]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(paragraphs),
        model_writer=model,
        model_type="bpe",
        vocab_size=_SPM_VOCAB,
        hard_vocab_limit=False,
        byte_fallback=True,
        character_coverage=1.0,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=True,
        split_digits=True,
        allow_whitespace_only_pieces=True,
        max_sentence_length=1 << 16,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        eos_piece=_EOS,
        control_symbols=_special_pieces(fim),
        num_threads=1,
        minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())

    vocab = _Vocab()
    vocab.scores = []
    for i in range(sp.get_piece_size()):
        if sp.is_unknown(i):
            kind = _UNKNOWN
        elif sp.is_control(i):
            kind = _CONTROL
        elif sp.is_byte(i):
            kind = _BYTE
        elif sp.is_unused(i):
            kind = _UNUSED
        else:
            kind = _NORMAL
        vocab.add(sp.id_to_piece(i), kind, float(sp.get_score(i)))
    vocab.bos_id = sp.bos_id()
    if vocab.tokens[sp.eos_id()] != _EOS or sp.piece_to_id("<0x00>") == sp.unk_id():
        raise RuntimeError("sentencepiece did not lay out the vocabulary as asked")
    return vocab


def _add_tokenizer(writer: gguf.GGUFWriter, vocab: _Vocab, tokenizer: TokenizerKind, fim: bool,
                   chat_template: str | None) -> None:
    """Write the tokenizer.* keys llama.cpp reads, special token ids included (no reliance on its guesses)."""
    keys = gguf.Keys.Tokenizer
    if tokenizer == "bpe":
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("qwen2")
    else:
        writer.add_tokenizer_model("llama")
        writer.add_tokenizer_pre("default")
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(vocab.types)
    if vocab.scores is not None:
        writer.add_token_scores(vocab.scores)
    if vocab.merges is not None:
        writer.add_token_merges(vocab.merges)
    special = vocab.special
    writer.add_uint32(keys.BOS_ID, vocab.bos_id)
    writer.add_uint32(keys.EOS_ID, special[_EOS])
    writer.add_uint32(keys.EOT_ID, special[_IM_END])
    writer.add_uint32(keys.PAD_ID, special[_EOS])
    if tokenizer == "spm":
        writer.add_uint32(keys.UNK_ID, special["<unk>"])
    if fim:
        for key, piece in zip(
            (keys.FIM_PRE_ID, keys.FIM_SUF_ID, keys.FIM_MID_ID, keys.FIM_PAD_ID), _FIM_TOKENS, strict=True
        ):
            writer.add_uint32(key, special[piece])
    writer.add_bool(keys.ADD_BOS, tokenizer == "spm")
    writer.add_bool(keys.ADD_EOS, False)
    if tokenizer == "spm":
        writer.add_bool(keys.ADD_PREFIX, True)
    if chat_template is not None:
        writer.add_chat_template(chat_template)


def _add_weights(
    writer: gguf.GGUFWriter,
    rng: np.random.Generator,
    *,
    n_vocab: int,
    n_layer: int,
    n_embd: int,
    n_ff: int,
    silent: list[int],
) -> None:
    """Random f32 weights, shaped so that greedy decoding wanders instead of looping.

    Measured over 8 seeds x 4 prompts x 50 greedy tokens (both tokenizers): plain 1/sqrt(fan_in) weights
    give about 39 distinct tokens per 50, but some runs repeat one token 20-40 times (seed 0 among them).
    Three changes fix that (mean 45 distinct, worst 40; 1-4 layers and widths 32-128 alike): queries and
    keys 3x larger, so attention is sharp and the state depends on which earlier tokens it picks, not only
    on the last one; the output matrix minus the normalised token embeddings, which makes repeating the
    current token unlikely; an output scale that spreads logits a few units apart, so that there are few
    near-ties for batched and single-token kernels to flip. Special tokens keep random output rows like any
    other, so greedy runs sometimes end on an end-of-generation token, as a real model's do.
    """
    tensors = gguf.MODEL_TENSOR

    def name(kind: gguf.MODEL_TENSOR, bid: int | None = None) -> str:
        base = gguf.TENSOR_NAMES[kind]
        return (base if bid is None else base.format(bid=bid)) + ".weight"

    def normal(shape: tuple[int, ...], std: float) -> np.ndarray:
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    def ones(size: int) -> np.ndarray:
        return np.ones(size, dtype=np.float32)

    # numpy shape (rows, cols) = (n_out, n_in); GGUF stores the dimensions reversed, as llama.cpp expects.
    embd = normal((n_vocab, n_embd), 1.0)
    writer.add_tensor(name(tensors.TOKEN_EMBD), embd)
    proj = 1.0 / np.sqrt(n_embd)
    for bid in range(n_layer):
        writer.add_tensor(name(tensors.ATTN_NORM, bid), ones(n_embd))
        writer.add_tensor(name(tensors.ATTN_Q, bid), normal((n_embd, n_embd), 3.0 * proj))
        writer.add_tensor(name(tensors.ATTN_K, bid), normal((n_embd, n_embd), 3.0 * proj))
        writer.add_tensor(name(tensors.ATTN_V, bid), normal((n_embd, n_embd), proj))
        writer.add_tensor(name(tensors.ATTN_OUT, bid), normal((n_embd, n_embd), proj))
        writer.add_tensor(name(tensors.FFN_NORM, bid), ones(n_embd))
        writer.add_tensor(name(tensors.FFN_GATE, bid), normal((n_ff, n_embd), proj))
        writer.add_tensor(name(tensors.FFN_UP, bid), normal((n_ff, n_embd), proj))
        writer.add_tensor(name(tensors.FFN_DOWN, bid), normal((n_embd, n_ff), 1.0 / np.sqrt(n_ff)))
    writer.add_tensor(name(tensors.OUTPUT_NORM), ones(n_embd))
    unit_embd = embd / np.linalg.norm(embd, axis=1, keepdims=True)
    output = normal((n_vocab, n_embd), 0.5) - np.float32(2.0) * unit_embd
    # A zero row gives logit 0, far below the best of hundreds of random logits: never the greedy choice.
    output[silent] = 0.0
    writer.add_tensor(name(tensors.OUTPUT), output.astype(np.float32))


def build_tiny_gguf(path: Path, *, tokenizer: TokenizerKind = "bpe", seed: int = 0, n_layer: int = 2,
                    n_embd: int = 64, n_head: int = 4, context_length: int = 2048,
                    fim: bool = True, chat_template: str | None = CHATML_TEMPLATE,
                    never_ends: bool = False) -> Path:
    """Write a tiny llama-architecture GGUF with random f32 weights to ``path`` and return ``path``.

    The same arguments always give a byte-identical file (the tokenizers are trained deterministically and
    the weights come from ``numpy.random.default_rng(seed)``), so tests can cache builds and compare
    outputs. The vocabulary is about 520 tokens for ``"bpe"`` (BOS = EOS = ``<|endoftext|>``, no BOS added,
    special tokens last, as in Qwen) and 600 for ``"spm"`` (``<unk>``, ``<s>``, ``<|endoftext|>``, the
    special tokens, then ``<0x00>``..``<0xFF>``, as in Llama 2, BOS added). ``<|im_end|>`` is the
    end-of-turn token; with ``fim`` the four Qwen FIM tokens are added and declared. The feed-forward width
    is ``4 * n_embd``. With ``never_ends`` no special token is ever the greedy choice, so a generation
    runs until its token budget (for tests that need a long one, such as a Ctrl-C in the middle). The file
    is written under a temporary name and renamed, so a reader never sees half.
    """
    if tokenizer not in ("bpe", "spm"):
        raise ValueError(f"tokenizer must be 'bpe' or 'spm', not {tokenizer!r}")
    if n_embd % n_head or (n_embd // n_head) % 2:
        raise ValueError("n_embd must split into n_head heads of even size (RoPE rotates pairs)")
    vocab = _bpe_vocab(fim) if tokenizer == "bpe" else _spm_vocab(fim)
    n_vocab = len(vocab.tokens)
    n_ff = 4 * n_embd

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    arch = gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.LLAMA]
    writer = gguf.GGUFWriter(str(partial), arch)
    writer.add_name(f"ds4spec-tiny-{tokenizer}-{n_layer}x{n_embd}-seed{seed}")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_vocab_size(n_vocab)
    writer.add_context_length(context_length)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_rope_freq_base(10000.0)
    _add_tokenizer(writer, vocab, tokenizer, fim, chat_template)
    rng = np.random.default_rng(seed)
    silent = [i for i, t in enumerate(vocab.types) if t == gguf.TokenType.CONTROL] if never_ends else []
    _add_weights(writer, rng, n_vocab=n_vocab, n_layer=n_layer, n_embd=n_embd, n_ff=n_ff, silent=silent)

    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path
