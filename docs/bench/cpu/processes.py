"""The same plain decoding in several processes, asked in turn: how far one process's speed differs from another's.

Each peer in `ds4spec bench --peers` runs in its own process (llama-server, one process a mode), while ds4spec's
modes share one; interleaving prompt by prompt removes the machine's drift from a comparison, not a difference
between processes. Each worker loads the pair's target and decodes 95 tokens greedily after each of 3 HumanEval
prompts, in turn with the others (order reversed every other round); prints each worker's median ms a token so far.
Workers named in ``--no-mmap`` read the weights into memory instead of mapping the file.

    python docs/bench/cpu/processes.py [--workers 3] [--rounds 6] [--no-mmap C,D]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import string
import time
from multiprocessing.connection import Connection

TOKENS = 95
PROMPTS = 3


def worker(conn: Connection, mapped: bool) -> None:
    import llama_cpp
    import numpy as np

    from ds4spec.bench.workloads import load_tasks
    from ds4spec.engine.loading import load_target
    from ds4spec.engine.settings import load_settings

    if not mapped:
        default = llama_cpp.llama_model_default_params

        def unmapped() -> llama_cpp.llama_model_params:
            params = default()
            params.use_mmap = False
            return params

        llama_cpp.llama_model_default_params = unmapped
    target = load_target(load_settings({"pair": "default"}))
    prompts = [task.prompt_tokens(target) for task in load_tasks("humaneval", PROMPTS)]
    conn.send("ready")
    while (i := conn.recv()) is not None:
        target.reset()
        token = int(np.argmax(target.eval_prompt(prompts[i])))
        start = time.perf_counter()
        for _ in range(TOKENS):
            token = int(np.argmax(target.eval_span_view([token])[0]))
        conn.send((time.perf_counter() - start) / TOKENS)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--no-mmap", default="", help="workers (A, B, ...) that read the weights into memory")
    args = parser.parse_args()
    mp.set_start_method("spawn")
    names = list(string.ascii_uppercase[: args.workers])
    unmapped = set(filter(None, args.no_mmap.split(",")))
    pipes: dict[str, Connection] = {}
    for name in names:
        ours, theirs = mp.Pipe()
        mp.Process(target=worker, args=(theirs, name not in unmapped)).start()
        ours.recv()
        pipes[name] = ours
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(args.rounds):
        for prompt in range(PROMPTS):
            for name in names if round_ % 2 else reversed(names):
                pipes[name].send(prompt)
                seconds[name].append(pipes[name].recv())
        print(round_, {n: round(statistics.median(s) * 1000, 2) for n, s in seconds.items()}, flush=True)
    for pipe in pipes.values():
        pipe.send(None)


if __name__ == "__main__":
    main()
