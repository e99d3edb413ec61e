"""llama.cpp plain decoding through llama-cpp-python's ``Llama``: the baseline every system is measured against.

It is the high-level API as a user would call it (``Llama.generate``, greedy), not ds4spec's own target
class, so that a difference between the two, in speed or in output, shows up in the table.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ds4spec.backend.runtime import default_threads, init_llama
from ds4spec.backend.weights_memory import reads_model_weights
from ds4spec.bench.peers.base import BenchTask, OutputRule, Peer, PeerResult

LLAMA_PLAIN = "llama.cpp plain"


class LlamaPlainPeer(Peer):
    name = LLAMA_PLAIN
    family = "llama.cpp"
    baseline = LLAMA_PLAIN

    _llama: Any = None

    def available(self) -> str | None:
        return None if self.setup.target.is_file() else f"{self.setup.target} does not exist"

    def _llama_kwargs(self) -> dict[str, Any]:
        """The settings ds4spec's target uses (context, batch, threads, GPU layers, where its weights are), in
        ``Llama``'s words."""
        s = self.setup
        threads = s.threads or default_threads()
        gpu = s.layers_on_gpu(-1)
        # Computed from the same memory as ds4spec's target (``weights_memory``): in the same process, a difference
        # between the two is then ds4spec's own.
        mapped = not reads_model_weights(s.mmap, gpu, s.target)
        # Flash attention on: ds4spec's target leaves it on auto, which llama.cpp turns on for these models,
        # while llama-cpp-python turns it off by default. Its other kernels flip near-ties (measured: a prose
        # answer of the 1.5B target differed at the 5th token), and the baseline must compute what ds4spec does.
        return {"model_path": str(s.target), "n_ctx": s.n_ctx, "n_batch": s.n_batch, "n_ubatch": s.n_batch,
                "n_threads": threads, "n_threads_batch": threads, "n_gpu_layers": gpu, "flash_attn": True,
                "use_mmap": mapped, "verbose": False}

    def load(self) -> None:
        from llama_cpp import Llama

        init_llama()  # routes llama.cpp's log through ds4spec's, as for the target
        self._llama = Llama(**self._llama_kwargs())

    def run(self, task: BenchTask, max_tokens: int) -> PeerResult:
        prompt = task.prompt
        rule, first = self._generate(prompt, max_tokens, task.stop)
        seconds = time.perf_counter() - first if first else 0.0
        return PeerResult(rule.tokens, seconds, len(rule.tokens), rule.reason)

    def _generate(self, prompt: Sequence[int], max_tokens: int, stop: Sequence[str]) -> tuple[OutputRule, float]:
        """Greedy tokens until ds4spec's rule ends the output; returns it and when the first token came.

        The clock starts at the first token, when the prompt has been evaluated, as ds4spec's does.
        """
        llama = self._llama
        rule = OutputRule(self.setup.vocab, prompt, max_tokens, stop)
        first = 0.0
        n_ctx = llama.n_ctx()
        # Read the whole prompt, as ds4spec's target and llama-server (--no-cache-prompt) do: `generate` would keep
        # the prefix the last prompt shares with this one, and a prompt read in other batches flips near-ties
        # (measured: 4 of 5 prose answers of the bench differed from both, none once read whole).
        llama.reset()
        tokens = llama.generate(list(prompt), temp=0.0, repeat_penalty=1.0)
        for generated, token in enumerate(tokens, start=1):
            if not first:
                first = time.perf_counter()
            if rule.add(int(token)):
                break
            if len(prompt) + generated >= n_ctx:  # the next evaluation would not fit
                rule.stop_at_context()
                break
        return rule, first

    def close(self) -> None:
        llama, self._llama = self._llama, None
        if llama is not None:
            llama.close()
