"""A GPU-like target on this CPU (not part of the product; a measuring aid for sessions without a GPU): it replays the
real target's greedy answers (recorded once in /tmp/ov/answers.json), each pass "running" for the H200's verify
profile times STEP_MS (default 2.4) from its launch and its rows waiting for that; everything else (tokenizer,
drafters, policies, the loop) is real. So the loop's own time shows as a GPU shows it: run 43's launching ahead was
built and weighed with it before the lease. Usage, from the repository root:
    [AHEAD=1] [STEP_MS=2.4] [EV=1] python docs/bench/gpu/emulated_gpu.py humaneval,prose lookup,triggers 3
AHEAD=1: the target says passes run beside the caller (launching ahead where it pays).
PROF='{"1": 1.0, "2": 2.94, ...}': another profile (a pass over n tokens in plain steps, as the bench prints it);
SKIP=0: the bench's first five prompts (default: prompts 6 to 10)."""
import json
import os
import sys
import time

import numpy as np

import ds4spec.core.speculative as _SS
from ds4spec.bench.command import _last
from ds4spec.bench.modes import load_mode
from ds4spec.bench.workloads import load_tasks
from ds4spec.core.plain import GenerationRequest, generate_plain
from ds4spec.core.sampling import SamplingSettings
from ds4spec.core.speculative import generate_speculative
from ds4spec.engine.loading import load_target, spec_settings
from ds4spec.engine.settings import load_settings
from ds4spec.policy.profile import VerifyProfile

STEP = float(os.environ.get("STEP_MS", "2.4")) / 1e3
H200 = VerifyProfile(
    {int(n): r * STEP for n, r in json.loads(os.environ["PROF"]).items()}
    if os.environ.get("PROF")
    else {
        n: r * STEP
        for n, r in {
            1: 1.0, 2: 3.02, 3: 3.08, 4: 3.15, 6: 3.38, 8: 3.54,
            12: 4.74, 16: 5.0, 24: 5.92, 32: 6.76, 48: 7.89, 64: 11.65,
        }.items()
    },
    "measured",
)
AHEAD = os.environ.get("AHEAD") == "1"

IDLE = []
CNT = {}
_orig_va = _SS._Cycle._verify_ahead
def _va(self, draft):
    v, sec, passes = _orig_va(self, draft)
    c = CNT.setdefault(CUR[0], [0, 0, 0])
    c[0] += 1
    c[1] += passes == 2
    c[2] += bool(draft) and passes == 1
    return v, sec, passes
_SS._Cycle._verify_ahead = _va
CUR = ['?']
def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass

class ReplayTarget:
    def __init__(self, real, answers):
        self.tokenizer = real.tokenizer
        self.n_ctx, self.n_batch, self.n_vocab = real.n_ctx, real.n_batch, real.n_vocab
        self.name = real.name
        self.answers = answers  # prompt tuple -> answer tokens (+ eos when it ended so)
        self._tokens = []
        self.M = None
        self.P = 0
    @property
    def n_past(self): return len(self._tokens)
    @property
    def tokens(self): return list(self._tokens)
    def recent_tokens(self, n): return self._tokens[-n:] if n > 0 else []
    def resync(self): pass
    def reset(self): self._tokens.clear()
    def checkpoint(self): pass
    def rollback(self, n):
        del self._tokens[n:]
    def read_prompt(self, tokens, cancelled):
        prompt = tuple(self._tokens + list(tokens))
        ans = self.answers[prompt]
        self.M = np.zeros((len(ans) + 1, self.n_vocab), dtype=np.float32)
        for i, t in enumerate(ans):
            self.M[i, t] = 1.0
        self.P = len(prompt)
        self._tokens = list(prompt)
        return self.M[0]
    def launch(self, tokens):
        now = time.perf_counter()
        if getattr(self, "_deadline", None) is not None and self.P and len(self._tokens) > self.P:
            IDLE.append(max(0.0, now - self._deadline))
        m = len(self._tokens) - self.P
        self._deadline = time.perf_counter() + STEP * H200.ratio(len(tokens) - 1)
        self._tokens.extend(tokens)
        rows = self.M[m + 1 : m + 1 + len(tokens)]
        if len(rows) < len(tokens):
            rows = np.vstack([rows, np.zeros((len(tokens) - len(rows), self.n_vocab), np.float32)])
        self._rows = rows
    def span_rows(self):
        spin(self._deadline - time.perf_counter())
        return self._rows
    def eval_span_view(self, tokens):
        self.launch(tokens)
        return self.span_rows()
    launches_ahead = "where_it_pays" if AHEAD else "never"
    eval_span = eval_span_view

wls = sys.argv[1].split(",")
modes = sys.argv[2].split(",")
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 2
settings = load_settings({})
real = load_target(settings)
os.makedirs("/tmp/ov", exist_ok=True)
cache = "/tmp/ov/answers.json"
if os.path.exists(cache):
    with open(cache) as fh:
        store = json.load(fh)
else:
    store = {}
tasks = {wl: load_tasks(wl, 5, skip=int(os.environ.get("SKIP", "5"))) for wl in wls}
answers = {}
for wl, ts in tasks.items():
    for task in ts:
        prompt = list(task.prompt_tokens(real))
        key = f"{wl}/{task.task_id}"
        if key not in store:
            real.reset()
            f = _last(generate_plain(real, GenerationRequest(prompt, 128, SamplingSettings(), task.stop)))
            store[key] = list(f.tokens) + ([real.tokenizer.eos] if f.reason.name == "EOG" else [0])
            with open(cache, "w") as fh:
                json.dump(store, fh)
        answers[tuple(prompt)] = store[key]
target = ReplayTarget(real, answers)
plans = {m: load_mode(settings, m, H200) for m in modes}
for wl, ts in tasks.items():
    tot = {m: 0.0 for m in ["plain", *modes]}
    loops = {m: [] for m in modes}
    means = {}
    idle = {}
    for rep in range(reps):
        for task in ts:
            req = GenerationRequest(list(task.prompt_tokens(real)), 128, SamplingSettings(), task.stop)
            for m in ["plain", *modes]:
                target.reset()
                target._deadline = None
                IDLE.clear()
                CUR[0] = wl + '/' + m
                if m == "plain":
                    f = _last(generate_plain(target, req))
                    ref = f.tokens
                else:
                    p = plans[m]
                    f = _last(
                        generate_speculative(
                            target, p.drafter, req, task.draft_context(), spec_settings(p.settings),
                            policy=p.policy(task, False),
                        )
                    )
                    assert f.tokens == ref, (m, task.task_id)
                    loops[m].append(f.stats.loop_median_seconds * 1e3)
                    means.setdefault(m, [0.0, 0])
                    means[m][0] += f.stats.loop_seconds
                    means[m][1] += f.stats.target_forward_passes
                    if rep == 0 and os.environ.get('EV'):
                        print(
                            m,
                            task.task_id,
                            {k: (v.cycles, v.drafted_tokens, v.accepted_tokens) for k, v in f.stats.events.items()},
                            f.stats.drafted_tokens,
                        )
                tot[m] += f.stats.generation_seconds
                idle.setdefault(m, [0.0, 0])
                idle[m][0] += sum(IDLE)
                idle[m][1] += len(IDLE)
    print(wl, "GPU idle us/pass:", {m: round(a / max(n, 1) * 1e6, 1) for m, (a, n) in idle.items()})
    print(
        wl,
        "  ".join(
            f"{m} {tot['plain'] / tot[m]:.3f}x"
            + (
                f" (loop {np.median(loops[m]):.3f} ms, mean {means[m][0]/means[m][1]*1e3:.3f})"
                if m in loops
                else f" ({tot[m]:.2f}s)"
            )
            for m in tot
        ),
        flush=True,
    )

print('ahead cycles, of them held drafts (2 passes), rejected-first drafts:', CNT)
