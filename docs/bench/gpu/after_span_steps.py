"""Run on the GPU machine (run 29): what a plain step costs right after a pass over n tokens, and where a pass's time
goes (llama_decode, which returns before the GPU is done, the wait, copying the logits rows out, argmax over them).

    bash docs/bench/gpu/device-steps.sh py docs/bench/gpu/after_span_steps.py
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from ds4spec.backend.runtime import llama_cpp
from ds4spec.engine.loading import load_target
from ds4spec.engine.settings import Settings

target = load_target(Settings())
tokens = target.tokenizer.tokenize(b'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n' * 4)
target.eval_prompt(tokens[:64])
base = target.n_past


def step() -> float:
    start = time.perf_counter()
    target.eval_span([tokens[target.n_past % len(tokens)]])
    return time.perf_counter() - start


for _ in range(20):
    step()
target.rollback(base)
steady = [step() for _ in range(60)]
target.rollback(base)
print(f"steady step median {statistics.median(steady) * 1e3:.3f} ms")
for n in (2, 4, 8, 16):
    after: list[list[float]] = [[] for _ in range(5)]
    spans = []
    for _ in range(12):
        for _ in range(6):
            step()
        at = target.n_past
        start = time.perf_counter()
        target.eval_span([tokens[i % len(tokens)] for i in range(n)])
        spans.append(time.perf_counter() - start)
        target.rollback(at + 1)
        for times in after:
            times.append(step())
        if target.n_past > base + 300:
            target.rollback(base)
    print(f"span {n:2d}: {statistics.median(spans) * 1e3:.3f} ms; steps after it: "
          + ", ".join(f"{statistics.median(times) * 1e3:.3f}" for times in after) + " ms")

for n in (1, 4, 16, 64):
    parts: dict[str, list[float]] = {"decode": [], "sync": [], "copy": [], "argmax": []}
    for _ in range(10):
        at = target.n_past
        span = [tokens[i % len(tokens)] for i in range(n)]
        batch = target._batch
        for i, token in enumerate(span):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = token, at + i, 1, True
            batch.seq_id[i][0] = 0
        batch.n_tokens = n
        a = time.perf_counter()
        llama_cpp.llama_decode(target._ctx, batch)
        b = time.perf_counter()
        llama_cpp.llama_synchronize(target._ctx)
        c = time.perf_counter()
        rows = np.empty((n, target.n_vocab), dtype=np.float32)
        for r in range(n):
            rows[r] = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(target._ctx, r), shape=(target.n_vocab,))
        d = time.perf_counter()
        for r in range(n):
            int(np.argmax(rows[r]))
        e = time.perf_counter()
        target._tokens.extend(span)
        target.rollback(at)
        for name, seconds in zip(parts, (b - a, c - b, d - c, e - d), strict=True):
            parts[name].append(seconds)
    print(f"pass over {n:2d}: " + ", ".join(f"{k} {statistics.median(v) * 1e3:.3f}" for k, v in parts.items()) + " ms")
