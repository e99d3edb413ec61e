"""Getting the chat's models ready: pull the pair's missing models (as ``ds4spec models pull`` does), then load.

Runs in a worker thread; what it has to say goes to the callbacks, never to stdout or stderr, which belong
to the full-screen interface.
"""

from __future__ import annotations

from collections.abc import Callable

from ds4spec.engine.engine import Engine
from ds4spec.engine.loading import drafter_model, target_name, without_pair_drafter
from ds4spec.engine.settings import Settings
from ds4spec.errors import ModelError
from ds4spec.store import local as store
from ds4spec.store.manifests import Manifest, load_manifests
from ds4spec.store.progress import ProgressListener


def missing_models(settings: Settings) -> list[Manifest]:
    """The known models these settings would load that are not downloaded yet (paths are never pulled).

    The drafter counts when it loads a model (``drafter_model``): ``lookup`` and ``none`` need none.
    """
    manifests = load_manifests()
    names = [target_name(settings), drafter_model(settings)]
    wanted = [manifests[n] for n in dict.fromkeys(names) if n in manifests]
    return [m for m in wanted if store.model_status(m) == "not pulled"]


def _ignore(text: str) -> None:
    pass


def prepare_engine(settings: Settings, *, listener: ProgressListener, stage: Callable[[str], None],
                   note: Callable[[str], None] = _ignore) -> Engine:
    """Pulls what is missing, then loads the engine. ``listener`` hears the bytes of each download and
    check, ``stage`` each step, ``note`` what the user should know afterwards (each model downloaded).

    Errors are ``Ds4Error``s with one-line messages, as everywhere in ds4spec. Only the target must be
    there: without a pair's drafter that cannot be downloaded the chat goes on as ``complete`` does without
    one that was never pulled (text lookup with triggers on, else plain decoding; the status bar says which).
    """
    target = target_name(settings)
    for manifest in missing_models(settings):
        stage(f"downloading {manifest.name} (first run)")
        try:
            path = store.pull(manifest, progress=False, listener=listener)
        except ModelError as exc:
            if manifest.name == target or settings.draft is not None:
                raise
            note(f"{exc}; going on without this drafter")  # the status bar shows what drafts instead
            settings = without_pair_drafter(settings)  # so that the engine does not say it is missing again
            continue
        note(f"downloaded {manifest.name} to {path} (first run)")
    stage("loading the models")
    return Engine.load(settings, note)
