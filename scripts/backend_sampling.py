"""Whether llama.cpp's greedy sampling on its backend (an argmax inside the graph, no logits copied out) makes a pass
and its verdict cheaper than ds4spec's (numpy's argmax of each row read from llama.cpp's output buffer).

    .venv/bin/python scripts/backend_sampling.py [--target NAME|PATH] [--spans 1,16,31] [--passes 24] [--rounds 2]
                                                 [--gpu-layers N]

Loads the target into a llama.cpp context that allows a backend sampler as many outputs a sequence as a batch holds,
reads a 118-token prompt, then, for each span length, times ``--passes`` passes over that many tokens (the target's
own greedy token, then fixed ids, as a draft would be), each with its greedy tokens: read from the logits by numpy,
then again with llama.cpp's greedy sampler attached to the sequence (``llama_set_sampler``), round after round.
Prints the median milliseconds of a pass with its tokens both ways, and whether both chose the same tokens.

Why: on a GPU every pass copies its logits (151,936 floats a row for Qwen2.5) to the host before ds4spec reads
them, and a long copy's verify pass copies dozens of rows; sampled on the backend, only the tokens come back. On a
2-core AVX-512 CPU it did not pay (run 73: a pass over 31 tokens 475 ms against 450 to 462, over 1 token 70.8
against 70.4 to 70.9): ggml's argmax of a row cost more than numpy's. Greedy only: sampling at a temperature, or
with a repeat penalty, needs the logits.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence

import numpy as np

from ds4spec.backend.runtime import default_threads, gpu_offload_supported, init_llama, llama_cpp
from ds4spec.engine.loading import locate_model, target_name
from ds4spec.engine.settings import Settings
from ds4spec.errors import Ds4Error

PROMPT = [(i * 7919) % 20000 + 100 for i in range(118)]  # fixed ids, taken modulo the target's vocabulary
N_BATCH = 512


class Context:
    """A llama.cpp context over one sequence whose greedy tokens are read from the logits or sampled on the backend."""

    def __init__(self, path: str, gpu_layers: int | None) -> None:
        init_llama()
        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = (-1 if gpu_offload_supported() else 0) if gpu_layers is None else gpu_layers
        self.model = llama_cpp.llama_model_load_from_file(path.encode("utf-8"), mparams)
        if not self.model:
            raise Ds4Error(f"llama.cpp could not load {path}")
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx, cparams.n_batch, cparams.n_ubatch, cparams.n_seq_max = 2048, N_BATCH, N_BATCH, 1
        cparams.n_threads = cparams.n_threads_batch = default_threads()
        cparams.n_outputs_max_per_seq = N_BATCH  # llama.cpp's default, 1, refuses a backend sampler a draft's rows
        cparams.no_perf = True
        self.ctx = llama_cpp.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            raise Ds4Error(f"llama.cpp could not create a context for {path}")
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(self.model)))
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.batch = llama_cpp.llama_batch_init(N_BATCH, 0, 1)
        self.n_past = 0
        self.on_backend = False
        self.chain: object | None = None  # the greedy chain attached to the sequence

    def sample_on_backend(self, on: bool) -> None:
        """Attaches a fresh greedy chain to the sequence (a chain is set up for one context once), or detaches it."""
        chain = None
        if on:
            chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
        attached = llama_cpp.llama_set_sampler(self.ctx, 0, chain)
        if self.chain is not None:
            llama_cpp.llama_sampler_free(self.chain)  # the context holds a sampler it is given, and let go of this one
        self.chain, self.on_backend = chain, on
        if on and not attached:
            raise Ds4Error("llama.cpp could not sample greedily on this backend")

    def greedy(self, tokens: Sequence[int], outputs: int | None = None) -> list[int]:
        """One pass over ``tokens`` after the context; the greedy token after each of the last ``outputs`` (all)."""
        batch = self.batch
        first_output = len(tokens) - (len(tokens) if outputs is None else outputs)
        for i, token in enumerate(tokens):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, self.n_past + i, 1
            batch.logits[i] = i >= first_output
            batch.seq_id[i][0] = 0
        batch.n_tokens = len(tokens)
        if llama_cpp.llama_decode(self.ctx, batch) != 0:
            raise Ds4Error(f"llama_decode failed on a pass over {len(tokens)} tokens")
        self.n_past += len(tokens)
        n = len(tokens) - first_output
        if self.on_backend:
            return [int(llama_cpp.llama_get_sampled_token_ith(self.ctx, i)) for i in range(first_output, len(tokens))]
        rows = np.ctypeslib.as_array(llama_cpp.llama_get_logits(self.ctx), shape=(n, self.n_vocab))
        return [int(np.argmax(row)) for row in rows]

    def rollback(self, n: int) -> None:
        llama_cpp.llama_memory_seq_rm(self.memory, 0, n, -1)
        self.n_past = n

    def read_prompt(self) -> int:
        """Reads the prompt afresh in one pass whose last token alone is an output; the greedy token after it."""
        llama_cpp.llama_memory_clear(self.memory, True)
        self.n_past = 0
        return self.greedy([t % self.n_vocab for t in PROMPT], outputs=1)[0]


def timed_passes(ctx: Context, span: int, passes: int) -> tuple[float, list[tuple[int, ...]]]:
    """The median seconds of a pass over ``span`` tokens with its greedy tokens, and the tokens of each pass."""
    token = ctx.read_prompt()
    seconds, chosen = [], []
    for _ in range(passes):
        tokens = [token, *(((token + j) % 1000 + 10) % ctx.n_vocab for j in range(1, span))]
        start = time.perf_counter()
        out = ctx.greedy(tokens)
        seconds.append(time.perf_counter() - start)
        ctx.rollback(ctx.n_past - span + 1)  # keeps the first token, as a rejected draft would
        chosen.append(tuple(out))
        token = out[0]
    return statistics.median(seconds), chosen


def parse_spans(text: str) -> list[int]:
    """``--spans``: tokens a pass, comma-separated, each from 1 to a batch; a one-line exit otherwise."""
    try:
        spans = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        spans = []
    if not spans or any(not 1 <= s <= N_BATCH for s in spans):
        raise SystemExit(f"backend_sampling.py: --spans must be numbers of tokens from 1 to {N_BATCH} separated by "
                         f"commas, got {text!r}")
    return spans


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default=None, help="a model name or GGUF path (default: the default pair's)")
    parser.add_argument("--spans", default="1,16,31", help="tokens a pass, comma-separated (default 1,16,31)")
    parser.add_argument("--passes", type=int, default=24, help="passes timed per span and way (default 24)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, the two ways' order alternating (default 2)")
    parser.add_argument("--gpu-layers", type=int, default=None, help="layers offloaded (default: all with a GPU)")
    args = parser.parse_args(argv)
    spans = parse_spans(args.spans)
    if args.passes < 1 or args.rounds < 1:
        raise SystemExit("backend_sampling.py: --passes and --rounds must be at least 1")
    try:
        path, _ = locate_model(target_name(Settings(target=args.target)))
        ctx = Context(str(path), args.gpu_layers)
        for span in spans:
            times: dict[bool, list[float]] = {False: [], True: []}
            tokens: dict[bool, list[tuple[int, ...]]] = {}
            for r in range(args.rounds):
                for on in (False, True) if r % 2 == 0 else (True, False):
                    ctx.sample_on_backend(on)
                    seconds, tokens[on] = timed_passes(ctx, span, args.passes)
                    times[on].append(seconds)
            ctx.sample_on_backend(False)
            host, backend = (statistics.median(times[on]) * 1000 for on in (False, True))
            print(f"span {span}: logits read by numpy {host:.2f} ms, sampled on the backend {backend:.2f} ms "
                  f"(backend / numpy {backend / host:.3f}); same tokens: {tokens[False] == tokens[True]}")
    except Ds4Error as exc:
        raise SystemExit(f"backend_sampling.py: {exc}") from None


if __name__ == "__main__":
    main()
