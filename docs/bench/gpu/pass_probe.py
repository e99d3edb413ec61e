"""Device probe for run 42 (not part of the product): where plain, lookup and triggers spend a token's time, and a
one-token pass's launch against the wait for its rows. Run on the device:
`bash docs/bench/gpu/device-steps.sh py docs/bench/gpu/pass_probe.py humaneval`."""
import random
import sys
import time

# Unused by name: loads llama.cpp's shared library up front, as this probe always has
# (ds4spec.backend.runtime imports llama_cpp lazily, on first use).
import llama_cpp  # noqa: F401
import numpy as np

from ds4spec.backend.target import LlamaTarget
from ds4spec.bench.command import _last, warm_up
from ds4spec.bench.modes import load_mode
from ds4spec.bench.workloads import load_tasks
from ds4spec.core.plain import GenerationRequest, generate_plain
from ds4spec.core.sampling import SamplingSettings
from ds4spec.core.speculative import generate_speculative
from ds4spec.engine.loading import load_target, spec_settings
from ds4spec.engine.settings import load_settings
from ds4spec.policy.profile import profile_for

RUN, VIEW = [0.0], [0.0]
ones = []  # (launch s, sync+view s) of single-token passes
orig_run, orig_view = LlamaTarget._run, LlamaTarget.eval_span_view
def run(self, tokens, *, want_all):
    t = time.perf_counter()
    try:
        return orig_run(self, tokens, want_all=want_all)
    finally:
        RUN[0] += time.perf_counter() - t
def view(self, tokens):
    t = time.perf_counter()
    r0 = RUN[0]
    rows = orig_view(self, tokens)
    np.asarray(rows[0]).max()  # what choosing reads
    d = time.perf_counter() - t
    launch = RUN[0] - r0
    VIEW[0] += d
    if len(tokens) == 1:
        ones.append((launch, d - launch))
    return rows
LlamaTarget._run, LlamaTarget.eval_span_view = run, view

wl = sys.argv[1] if len(sys.argv) > 1 else "humaneval"
settings = load_settings({})
target = load_target(settings)
profile = profile_for(target, announce=False)
print("profile", {n: round(profile.ratio(n - 1), 2) for n in sorted(profile.spans)})
modes = ["lookup", "triggers"]
plans = {m: load_mode(settings, m, profile) for m in modes}
tasks = load_tasks(wl, 5)
warm_up(target, list(plans.values()), tasks[0])
res = {m: np.zeros(6) for m in ["plain", *modes]}  # gen s, view s, launch s, passes, loop s, drafted
rng = random.Random(0)
for rep in range(3):
    for task in tasks:
        req = GenerationRequest(task.prompt_tokens(target), 128, SamplingSettings(), task.stop)
        order = ["plain", *modes]
        rng.shuffle(order)
        for m in order:
            target.reset()
            del ones[:]
            v0, r0 = VIEW[0], RUN[0]
            if m == "plain":
                f = _last(generate_plain(target, req))
            else:
                p = plans[m]
                f = _last(
                    generate_speculative(
                        target, p.drafter, req, task.draft_context(), spec_settings(p.settings),
                        policy=p.policy(task, False),
                    )
                )
            s = f.stats
            # the prompt's pass is not single-token; ones[0] is the first step
            pr = ones[0] if ones else (0, 0)
            res[m] += [
                s.generation_seconds, VIEW[0] - v0, RUN[0] - r0,
                s.target_forward_passes, s.loop_seconds, s.drafted_tokens,
            ]
            if rep == 2 and m != "plain":
                print(
                    m, task.task_id, {k: (v.cycles, v.drafted_tokens, v.accepted_tokens) for k, v in s.events.items()}
                )
launch = np.array([a for a, _ in ones]) * 1e3
sync = np.array([b for _, b in ones]) * 1e3
print(
    f"last run's single-token passes: launch median {np.median(launch):.3f} ms,"
    f" sync+read median {np.median(sync):.3f} ms"
)
for m, (g, _v, _r, n, loop, d) in res.items():
    # prompt passes are inside _v and _r: subtract nothing, compare per generated pass
    print(
        f"{m:9s} gen {g:.3f}s passes {int(n)} per pass {g/n*1e3:.3f} ms;"
        f" drafted {int(d)}; loop mean {loop/n*1e3:.3f} ms"
    )
base = res["plain"][0] / res["plain"][3]
for m in modes:
    g, n = res[m][0], res[m][3]
    print(f"{m}: {res['plain'][0]/g:.3f}x of plain")
