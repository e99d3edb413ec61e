"""Where ds4spec keeps user data (models, sessions) and configuration."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import platformdirs

APP = "ds4spec"


def data_dir() -> Path:
    """Per-user data directory: ``$DS4SPEC_HOME`` if set, else the platform's (XDG on Linux)."""
    home = os.environ.get("DS4SPEC_HOME")
    if home:
        return Path(home).expanduser()
    return Path(platformdirs.user_data_dir(APP))


def models_dir() -> Path:
    return data_dir() / "models"


def cache_dir() -> Path:
    """Rebuildable things (llama.cpp builds, an sdist): where ``scripts/setup.sh`` keeps its wheels too."""
    return Path(platformdirs.user_cache_dir(APP))


def config_dir() -> Path:
    """``$DS4SPEC_HOME/config`` when DS4SPEC_HOME is set, so that one variable isolates everything."""
    home = os.environ.get("DS4SPEC_HOME")
    if home:
        return Path(home).expanduser() / "config"
    return Path(platformdirs.user_config_dir(APP))


def config_file() -> Path:
    return Path(os.environ.get("DS4SPEC_CONFIG") or config_dir() / "config.toml")


def shipped_dir(name: str) -> Path:
    """A folder that ships beside the package (``models``, ``triggers``): at the repository root in a checkout
    or an editable install; under ``<prefix>/share/ds4spec/`` where a wheel put it (pyproject's data-files)."""
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / name).is_dir():  # not some other site-packages folder
        return root / name
    return Path(sys.prefix) / "share" / APP / name


def repo_models_dir() -> Path:
    """The manifests shipped with ds4spec."""
    return shipped_dir("models")
