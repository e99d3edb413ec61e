"""ds4spec's plain decoding against llama-server's, prompt by prompt in alternating order, for several rounds: whether
ds4spec's own process decodes slower than llama.cpp's server where neither drafts (the default pair's code, run 58).
Prints each pair of answers (tokens, generation seconds, tokens a second) and the totals; the ratio per answer is what
to read, as the machine drifts by 10 to 20% within a run.

    python docs/bench/cpu/plain_vs_server.py humaneval 0 10 default 4   # workload, skip, limit, pair, rounds
"""

from __future__ import annotations

import statistics
import sys

from ds4spec.bench.command import _bench_task, _last, warm_up
from ds4spec.bench.peer_runs import stderr_line
from ds4spec.bench.peers.base import PeerSetup
from ds4spec.bench.peers.llama_server import LlamaServerPeer, SharedServerBuild
from ds4spec.bench.workloads import load_tasks
from ds4spec.core.plain import GenerationRequest, generate_plain
from ds4spec.core.sampling import SamplingSettings
from ds4spec.engine.loading import load_target
from ds4spec.engine.settings import load_settings


def main(workload: str, skip: int, limit: int, pair: str, rounds: int) -> None:
    settings = load_settings({"pair": pair})
    target = load_target(settings)
    setup = PeerSetup(target.path, target.tokenizer, settings.ctx, settings.batch, settings.threads,
                      settings.gpu_layers, None)
    server = LlamaServerPeer(setup, None, SharedServerBuild(stderr_line))
    server.load()
    tasks = load_tasks(workload, limit, skip=skip)
    warm_up(target, [], tasks[0])
    totals = {"ds4spec": [0.0, 0], "server": [0.0, 0]}
    ratios: list[float] = []
    try:
        for r in range(rounds):
            for i, task in enumerate(tasks):
                timed: dict[str, tuple[int, float]] = {}
                for arm in ("ds4spec", "server") if (i + r) % 2 == 0 else ("server", "ds4spec"):
                    if arm == "ds4spec":
                        target.reset()
                        request = GenerationRequest(task.prompt_tokens(target), 128, SamplingSettings(), task.stop)
                        stats = _last(generate_plain(target, request)).stats
                        timed[arm] = (stats.committed_tokens, stats.generation_seconds)
                    else:
                        result = server.run(_bench_task(target, task), 128)
                        timed[arm] = (result.timed_tokens, result.seconds)
                    totals[arm][0] += timed[arm][1]
                    totals[arm][1] += timed[arm][0]
                rates = {arm: n / s for arm, (n, s) in timed.items()}
                ratios.append(rates["ds4spec"] / rates["server"])
                print(f"{task.task_id:14s}" + "  ".join(
                    f"{arm} {n} tokens {s:.3f} s {rates[arm]:.1f} tok/s" for arm, (n, s) in timed.items()), flush=True)
    finally:
        server.close()
    for arm, (seconds, tokens) in totals.items():
        print(f"{arm}: {tokens / seconds:.2f} tok/s over {tokens} tokens")
    faster = sum(ratio > 1 for ratio in ratios)
    print(f"ds4spec/server per answer: median {statistics.median(ratios):.3f}, mean {statistics.fmean(ratios):.3f}, "
          f"ds4spec faster in {faster} of {len(ratios)}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
