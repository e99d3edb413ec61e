"""Whether the order in which processes load the target changes how fast each then decodes.

    .venv/bin/python scripts/load_order.py [--target NAME|PATH] [--processes 2] [--tokens 48] [--rounds 6]
                                           [--ballast MIB]

Starts ``--processes`` worker processes one after the other; each loads the target with ds4spec's own
``LlamaTarget`` and says when it is ready, so that each loads while the earlier ones hold their weights. Then, round
after round (the order reversed every other round), each worker in turn reads a 118-token prompt and takes
``--tokens`` greedy plain steps; it prints each worker's milliseconds per step, and the first-loaded worker's mean
over the others'. ``--ballast MIB`` first takes that much memory and touches every page of it, held to the end.

Why: on the Firecracker guests these notes are measured on (free page reporting on, nested paging), the process
that loaded its weights first decoded 5 to 9% slower than one loaded after it, with the same library and settings,
and a ballast of 1 to 4 GiB taken first made them equal (docs/benchmarks.md, run 72). The bench loads ds4spec's target
before its peers, so a peer in another process would gain that much for nothing; this tells whether a machine
does it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ds4spec.bench.ballast import Ballast

PROMPT = [(i * 7919) % 20000 + 100 for i in range(118)]  # fixed ids, taken modulo the target's vocabulary


def worker(name: str | None, tokens: int) -> None:
    """Loads the target, says ``ready``, then times ``tokens`` plain steps for every line read from stdin."""
    from ds4spec.engine.loading import load_target
    from ds4spec.engine.settings import Settings
    from ds4spec.errors import Ds4Error

    try:
        target = load_target(Settings(target=name))
    except Ds4Error as exc:
        print(f"error {exc}", flush=True)
        return
    prompt = [t % target.n_vocab for t in PROMPT]
    print("ready", flush=True)
    for _ in sys.stdin:
        target.reset()
        logits = target.eval_prompt(prompt)
        start = time.perf_counter()
        for _ in range(tokens):
            logits = target.eval_span_view([int(np.argmax(logits))])[0]
        print(f"{(time.perf_counter() - start) / tokens * 1000:.2f}", flush=True)


def start_worker(args: argparse.Namespace) -> subprocess.Popen[str]:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", "--tokens", str(args.tokens)]
    if args.target:
        command += ["--target", args.target]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "ready":
        proc.kill()
        raise SystemExit(f"load_order.py: a worker could not load the target: {line[6:] or 'it exited'}")
    return proc


def step_ms(proc: subprocess.Popen[str]) -> float:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    return float(proc.stdout.readline())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", default=None, help="a model name or GGUF path (default: the default pair's)")
    parser.add_argument("--processes", type=int, default=2, help="worker processes, loaded in turn (default 2)")
    parser.add_argument("--tokens", type=int, default=48, help="plain steps a worker times per round (default 48)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds (default 6)")
    parser.add_argument("--ballast", type=int, default=0, metavar="MIB", help="memory taken first (default 0)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.target, args.tokens)
        return
    if args.processes < 2 or args.tokens < 1 or args.rounds < 1 or args.ballast < 0:
        raise SystemExit("load_order.py: --processes must be at least 2, --tokens and --rounds at least 1, "
                         "--ballast at least 0")
    ballast = Ballast(args.ballast)
    workers = []
    try:
        for _ in range(args.processes):
            workers.append(start_worker(args))
        times: list[list[float]] = [[] for _ in workers]
        for r in range(args.rounds):
            order = range(len(workers)) if r % 2 == 0 else reversed(range(len(workers)))
            for i in order:
                times[i].append(step_ms(workers[i]))
    finally:
        for proc in workers:
            proc.kill()
        ballast.release()
    means = [sum(t) / len(t) for t in times]
    for i, t in enumerate(times):
        print(f"loaded {i + 1}: {means[i]:7.2f} ms/step  rounds " + " ".join(f"{x:.2f}" for x in t))
    print(f"first loaded / later: {means[0] / (sum(means[1:]) / len(means[1:])):.3f}")


if __name__ == "__main__":
    main()
