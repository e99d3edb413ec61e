"""Other systems that ``ds4spec bench --peers`` runs on the same target file, prompts and token budget.

Selection keys: ``llama`` (llama.cpp plain decoding, the baseline: always run when any peer is), ``lookup``
(llama-cpp-python's prompt lookup decoding), ``hf`` (transformers, plain and assisted by the pair's
drafter); ``all`` is all of them. Peers come in groups that are loaded together and run prompt by prompt,
interleaved, so that a peer and its own plain baseline see the same machine.
"""

from __future__ import annotations

from ds4spec.bench.peers.base import Peer, PeerResult, PeerSetup
from ds4spec.bench.peers.hf_assisted import HF_PLAIN, HfAssistedPeer, HfPlainPeer, SharedHfTarget
from ds4spec.bench.peers.llama_lookup import LlamaLookupPeer
from ds4spec.bench.peers.llama_plain import LLAMA_PLAIN, LlamaPlainPeer
from ds4spec.errors import UsageError

PEER_KEYS = ("llama", "lookup", "hf")

__all__ = ["HF_PLAIN", "LLAMA_PLAIN", "PEER_KEYS", "Peer", "PeerResult", "PeerSetup", "build_peer_groups",
           "parse_peers"]


def parse_peers(value: str) -> tuple[str, ...]:
    """``all``, ``none`` or a comma-separated list of keys, to the keys to run (the baseline included)."""
    words = [w.strip().lower() for w in value.split(",") if w.strip()]
    if words == ["none"]:
        return ()
    if "all" in words:
        return PEER_KEYS
    unknown = [w for w in words if w not in PEER_KEYS]
    if unknown or not words:
        raise UsageError(f"--peers takes all, none or a list of {', '.join(PEER_KEYS)}; got {value!r}")
    return tuple(k for k in PEER_KEYS if k in words or k == "llama")


def build_peer_groups(keys: tuple[str, ...], setup: PeerSetup) -> list[list[Peer]]:
    groups: list[list[Peer]] = []
    if keys:
        llama: list[Peer] = [LlamaPlainPeer(setup)]
        if "lookup" in keys:
            llama.append(LlamaLookupPeer(setup))
        groups.append(llama)
    if "hf" in keys:
        shared = SharedHfTarget(setup)
        groups.append([HfPlainPeer(setup, shared), HfAssistedPeer(setup, shared)])
    return groups
