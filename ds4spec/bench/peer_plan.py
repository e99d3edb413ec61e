"""The systems of ``ds4spec bench --peers``, set up from the target's file, the pair and the settings: the same file,
context, batch, threads and GPU layers as ds4spec's own target, and the drafters each peer takes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ds4spec.bench.peer_runs import PeerSitting, SystemRuns, run_peer_groups, stderr_line
from ds4spec.bench.peers import SERVER_KEY, BenchTask, Peer, PeerSetup, build_peer_groups
from ds4spec.bench.peers.base import TargetVocab
from ds4spec.bench.peers.family_drafter import family_drafter
from ds4spec.engine.loading import drafter_spec
from ds4spec.engine.settings import Settings
from ds4spec.errors import Ds4Error


class PeerPlan:
    """The systems of ``--peers``, set up from the target's file: run between ds4spec's own runs of each prompt
    (``interleaved``), or after them, one group at a time (``apart``)."""

    def __init__(self, settings: Settings, keys: tuple[str, ...], peer_draft: str | None) -> None:
        self.settings = settings
        self.keys = keys
        self.peer_draft = peer_draft

    @contextmanager
    def interleaved(self, target_path: Path, warm_up: list[BenchTask]) -> Iterator[PeerSitting]:
        sitting = PeerSitting(self.settings.max_tokens)
        with self._groups(target_path) as groups:
            try:
                for group in groups:
                    sitting.start(group, warm_up[0] if warm_up else None)
                yield sitting
            finally:
                sitting.close()

    def apart(self, target_path: Path, tasks: list[BenchTask]) -> list[SystemRuns]:
        with self._groups(target_path) as groups:
            return run_peer_groups(groups, tasks, self.settings.max_tokens)

    @contextmanager
    def _groups(self, target_path: Path) -> Iterator[list[list[Peer]]]:
        settings = self.settings
        try:
            drafter, problem = drafter_spec(settings).model, None
        except Ds4Error as exc:  # an unknown pair: the assisted peer reports it, the others run
            drafter, problem = None, str(exc)
        with TargetVocab(target_path) as vocab:
            family: Path | None = None
            family_problem: str | None = None
            if any(k.startswith(SERVER_KEY) for k in self.keys):  # only llama-server's draft modes take this drafter
                family, family_problem = family_drafter(target_path, vocab.metadata.get("tokenizer.ggml.pre", ""),
                                                        vocab.tokenizer.n_vocab, self.peer_draft)
            setup = PeerSetup(target_path, vocab.tokenizer, settings.ctx, settings.batch, settings.threads,
                              settings.gpu_layers, drafter, problem, family, family_problem, settings.mmap)
            yield build_peer_groups(self.keys, setup, stderr_line)
