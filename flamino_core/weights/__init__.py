"""Checkpoints to the model's parameters: ``loading`` (identifiers to weights, the one entry
point), ``convert`` and ``key_maps``, ``hub``, the cache of converted weights, ``esmfold`` and
``esmfold_hub`` (ESMFold's weights).
"""

from __future__ import annotations

from flamino_core.doors import lazy_door

# The door (doors.py): each name the app imports from this package -> its module here.
_EXPORTS = {
    "load_fold_model": "esmfold",
    "FOLD_PRESETS": "esmfold_hub",
    **dict.fromkeys(["ModelError", "ModelWeights", "available_now", "cached_presets",
                     "default_model", "hub_reachable", "is_tiny_test_model", "offline_message",
                     "tiny_test_models"], "loading"),
}
__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)
