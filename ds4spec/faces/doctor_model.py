"""The model ``ds4spec doctor`` evaluates: built on the spot, so that the check needs no download.

A llama-architecture GGUF of one small layer with random weights and a byte-level vocabulary (each of the 256
bytes is a token, as in GPT-2's byte-level BPE, and one merge, since llama.cpp wants some), so that any text
tokenizes. It is only
evaluated, never asked for sense.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

N_EMBD = 32
N_HEAD = 4
N_FF = 64


def _byte_pieces() -> list[str]:
    """GPT-2's printable stand-in for each byte (its ``bytes_to_unicode``), the form llama.cpp expects."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = 0
    pieces = []
    for b in range(256):
        if b in printable:
            pieces.append(chr(b))
        else:
            pieces.append(chr(256 + shifted))
            shifted += 1
    return pieces


def build_doctor_model(path: Path, seed: int = 0) -> Path:
    """Writes the model to ``path`` (a few hundred kilobytes, in milliseconds) and returns ``path``."""
    tokens = [*_byte_pieces(), "\u0120t", "<|endoftext|>"]  # \u0120: the stand-in for a space
    eos = len(tokens) - 1
    writer = gguf.GGUFWriter(str(path), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.LLAMA])
    writer.add_name("ds4spec-doctor")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_vocab_size(len(tokens))
    writer.add_context_length(256)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(1)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.NORMAL] * eos + [gguf.TokenType.CONTROL])
    writer.add_token_merges(["\u0120 t"])
    writer.add_bos_token_id(eos)
    writer.add_eos_token_id(eos)
    writer.add_add_bos_token(False)

    rng = np.random.default_rng(seed)

    def weight(kind: gguf.MODEL_TENSOR, shape: tuple[int, ...], block: int | None = None) -> None:
        name = gguf.TENSOR_NAMES[kind]
        values = np.ones(shape, np.float32) if len(shape) == 1 else rng.standard_normal(shape, dtype=np.float32)
        writer.add_tensor((name if block is None else name.format(bid=block)) + ".weight",
                          values / np.float32(np.sqrt(shape[-1])))

    t = gguf.MODEL_TENSOR
    weight(t.TOKEN_EMBD, (len(tokens), N_EMBD))
    for kind in (t.ATTN_Q, t.ATTN_K, t.ATTN_V, t.ATTN_OUT):
        weight(kind, (N_EMBD, N_EMBD), 0)
    weight(t.ATTN_NORM, (N_EMBD,), 0)
    weight(t.FFN_NORM, (N_EMBD,), 0)
    weight(t.FFN_GATE, (N_FF, N_EMBD), 0)
    weight(t.FFN_UP, (N_FF, N_EMBD), 0)
    weight(t.FFN_DOWN, (N_EMBD, N_FF), 0)
    weight(t.OUTPUT_NORM, (N_EMBD,))
    weight(t.OUTPUT, (len(tokens), N_EMBD))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
