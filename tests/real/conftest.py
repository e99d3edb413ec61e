"""The real tier: the default model pair, pulled into the user's data directory by `scripts/setup.sh test`.

These tests fail, never skip, when the models are missing: CI must prove the real path works.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.target_options import TargetOptions
from ds4spec.store.local import load_pairs, resolve_model


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.real)


def pair_paths(name: str) -> dict[str, Path]:
    """The files of the pair ``name``'s target and drafter, pulled by `scripts/setup.sh test`."""
    pair = load_pairs()[name]
    return {"target": resolve_model(pair.target).path, "drafter": resolve_model(pair.drafter).path}


@pytest.fixture(scope="session")
def default_pair_paths() -> dict[str, Path]:
    return pair_paths("default")


@pytest.fixture(scope="session")
def f16_pair_paths() -> dict[str, Path]:
    return pair_paths("f16")


@pytest.fixture(scope="session")
def real_target(default_pair_paths: dict[str, Path]) -> Iterator[LlamaTarget]:
    with LlamaTarget(default_pair_paths["target"], TargetOptions(n_ctx=2048)) as target:
        yield target
