"""The families in Flax NNX (the only network code): ``families`` (the declarations),
``model_id`` (an identifier read once), ``config``, the networks (``esm2``, ``esmc``, ``stack``,
``attention``) and ``esmfold/`` (ESMFold).
"""

from __future__ import annotations

from flamino_core.doors import lazy_door

# The door (doors.py): each name the app imports from this package -> its module here.
_EXPORTS = {
    "MAX_RESIDUES": "config",
    **dict.fromkeys(["FoldConfig", "STEM_PRECISIONS"], "esmfold.config"),
    **dict.fromkeys(["ENSEMBLES", "ENSEMBLE_PREFIX", "FAMILIES", "PRESETS", "contact_families",
                     "ensemble_members"], "families"),
    **dict.fromkeys(["ModelId", "RANDOM_TEST_MODEL", "short_name"], "model_id"),
}
__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)
