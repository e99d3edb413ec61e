"""Measuring aid (not part of the product): a verify pass whose rows are copied to the host and their argmax taken in
numpy, as ds4spec verifies today, against the same pass with llama.cpp's backend greedy sampler choosing each row's
token inside the graph (no logits copied back). Both contexts read the same prompt; spans of 1, 4, 8, 16, 32 and 48
tokens (an edit's copies verify 20 to 47 on an H200) are timed in turn, and the chosen tokens must agree. Usage,
from the repository root (on the device:
`bash docs/bench/gpu/device-steps.sh py docs/bench/gpu/backend_sampling.py MODEL.gguf [REPS]`):
    python docs/bench/gpu/backend_sampling.py $(ds4spec models path qwen2.5-coder-1.5b) 20

Backend samplers need ``n_outputs_max_per_seq`` raised above its default of 1 for a span with several outputs
(llama.cpp refuses the batch otherwise), and while one is set the raw logits are not copied at all: sampled decoding
and anything else that reads a row would need the sampler detached (``llama_set_sampler``), which re-reserves the
graph.
"""

from __future__ import annotations

import ctypes
import statistics
import sys
import time

import numpy as np

from ds4spec.backend.runtime import default_threads, gpu_offload_supported, init_llama, llama_cpp

SPANS = (1, 4, 8, 16, 32, 48)
PROMPT = list(range(1000, 1100))


def main(path: str, reps: int) -> None:
    init_llama()
    mparams = llama_cpp.llama_model_default_params()
    mparams.n_gpu_layers = -1 if gpu_offload_supported() else 0
    model = llama_cpp.llama_model_load_from_file(path.encode(), mparams)
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
    batch = llama_cpp.llama_batch_init(512, 0, 1)
    keep: list[object] = []

    def context(backend: bool) -> object:
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx, cparams.n_batch, cparams.n_ubatch = 2048, 512, 512
        cparams.n_threads = cparams.n_threads_batch = default_threads()
        if backend:
            chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
            config = (llama_cpp.llama_sampler_seq_config * 1)()
            config[0].seq_id, config[0].sampler = 0, ctypes.cast(chain, ctypes.c_void_p)
            cparams.samplers = ctypes.cast(config, ctypes.POINTER(llama_cpp.llama_sampler_seq_config))
            cparams.n_samplers = 1
            cparams.n_outputs_max_per_seq = max(SPANS)
            keep.extend((chain, config))
        return llama_cpp.llama_init_from_model(model, cparams)

    def decode(ctx: object, tokens: list[int], pos: int, every: bool) -> None:
        batch.n_tokens = len(tokens)
        for i, token in enumerate(tokens):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.seq_id[i][0] = token, pos + i, 1, 0
            batch.logits[i] = every or i == len(tokens) - 1
        if llama_cpp.llama_decode(ctx, batch) != 0:
            raise RuntimeError(f"llama_decode failed on a span of {len(tokens)}")

    host, device = context(False), context(True)
    for ctx in (host, device):
        decode(ctx, PROMPT, 0, False)

    def span(ctx: object, n: int) -> tuple[float, list[int]]:
        start = time.perf_counter()
        decode(ctx, [1234] * n, len(PROMPT), True)
        if ctx is host:
            rows = np.ctypeslib.as_array(llama_cpp.llama_get_logits(ctx), shape=(n, n_vocab))
            chosen = [int(np.argmax(row)) for row in rows]
        else:
            chosen = [int(llama_cpp.llama_get_sampled_token_ith(ctx, i)) for i in range(n)]
        seconds = time.perf_counter() - start
        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), 0, len(PROMPT), -1)
        return seconds, chosen

    print(f"{path}: GPU offload {gpu_offload_supported()}, {default_threads()} threads, {reps} spans each")
    for n in SPANS:
        times: dict[str, list[float]] = {"host argmax": [], "backend greedy": []}
        for rep in range(reps + 3):
            order = ((host, "host argmax"), (device, "backend greedy"))
            results = [(name, *span(ctx, n)) for ctx, name in (order if rep % 2 else order[::-1])]
            if len({tuple(chosen) for _, _, chosen in results}) != 1:
                raise SystemExit(f"span of {n}: the two contexts chose different tokens")
            if rep >= 3:
                for name, seconds, _ in results:
                    times[name].append(seconds)
        a, b = (statistics.median(times[k]) * 1e3 for k in ("host argmax", "backend greedy"))
        print(f"span of {n:2d}: pass + host argmax {a:8.3f} ms, pass + backend greedy {b:8.3f} ms ({b / a:.3f})")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20)
