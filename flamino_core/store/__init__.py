"""The one store of what the model computed (``result_store`` on ``sqlite``) and the one
masked-pass path through it (``passes``).
"""

from __future__ import annotations

from flamino_core.doors import lazy_door

# The door (doors.py): each name the app imports from this package -> its module here.
_EXPORTS = {
    **dict.fromkeys(["CHUNK", "Cancelled", "RecordOutputs", "masked_log_probs", "model_key",
                     "record_outputs"], "passes"),
    "default_store": "result_store",
}
__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)
