"""Other systems that ``ds4spec bench --peers`` runs on the same target file, prompts and token budget.

Selection keys: ``llama`` (llama.cpp plain decoding, the baseline: always run when any peer is), ``lookup``
(llama-cpp-python's prompt lookup decoding), ``hf`` (transformers, plain and assisted by the pair's
drafter), ``llama-server`` (llama.cpp's own server, plain and in its default speculative modes) and
``llama-server:TYPE`` (one more ``--spec-type``, by llama.cpp's name); ``all`` is the four keys. Peers come
in groups that are loaded together and run prompt by prompt, interleaved, so that a peer and its own plain
baseline see the same machine.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ds4spec.bench.peers.base import BenchTask, Peer, PeerResult, PeerSetup
from ds4spec.bench.peers.hf_assisted import HF_PLAIN, HfAssistedPeer, HfPlainPeer, SharedHfTarget
from ds4spec.bench.peers.llama_lookup import LlamaLookupPeer
from ds4spec.bench.peers.llama_plain import LLAMA_PLAIN, LlamaPlainPeer
from ds4spec.bench.peers.llama_server import DEFAULT_SPEC_TYPES, SERVER_PLAIN, server_peers
from ds4spec.errors import UsageError

PEER_KEYS = ("llama", "lookup", "hf", "llama-server")
SERVER_KEY = "llama-server"
SPEC_TYPE = re.compile(r"^[a-z0-9][a-z0-9-]*$")

__all__ = [
    "HF_PLAIN",
    "LLAMA_PLAIN",
    "PEER_KEYS",
    "SERVER_KEY",
    "SERVER_PLAIN",
    "BenchTask",
    "Peer",
    "PeerResult",
    "PeerSetup",
    "build_peer_groups",
    "parse_peers",
]


def parse_peers(value: str) -> tuple[str, ...]:
    """``all``, ``none`` or a comma-separated list of keys, to the keys to run (the baseline included)."""
    words = [w.strip().lower() for w in value.split(",") if w.strip()]
    if words == ["none"]:
        return ()
    types = [w.split(":", 1)[1] for w in words if w.startswith(f"{SERVER_KEY}:")]
    unknown = [w for w in words if w not in (*PEER_KEYS, "all") and not w.startswith(f"{SERVER_KEY}:")]
    unknown += [t for t in types if not SPEC_TYPE.match(t)]
    if unknown or not words:
        raise UsageError(f"--peers takes all, none or a list of {', '.join(PEER_KEYS)} and {SERVER_KEY}:TYPE "
                         f"(a llama-server --spec-type); got {value!r}")
    chosen = [k for k in PEER_KEYS if k in words or k == "llama" or "all" in words]
    return (*chosen, *(f"{SERVER_KEY}:{t}" for t in dict.fromkeys(types)))


def build_peer_groups(keys: tuple[str, ...], setup: PeerSetup, log: Callable[[str], None]) -> list[list[Peer]]:
    groups: list[list[Peer]] = []
    if keys:
        llama: list[Peer] = [LlamaPlainPeer(setup)]
        if "lookup" in keys:
            llama.append(LlamaLookupPeer(setup))
        groups.append(llama)
    if "hf" in keys:
        shared = SharedHfTarget(setup)
        groups.append([HfPlainPeer(setup, shared), HfAssistedPeer(setup, shared)])
    extra = tuple(k.split(":", 1)[1] for k in keys if k.startswith(f"{SERVER_KEY}:"))
    if SERVER_KEY in keys or extra:
        chosen = DEFAULT_SPEC_TYPES if SERVER_KEY in keys else ()
        groups.append(server_peers(setup, tuple(dict.fromkeys((*chosen, *extra))), log))
    return groups
