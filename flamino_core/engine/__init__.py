"""The engine: ``engine`` (jitted calls), ``hardware`` (execution choices), ``planner`` (rows and
batches), ``windows`` (long sequences), ``memory``, ``device_memory``, ``sharding``.
"""

from __future__ import annotations

from flamino_core.doors import lazy_door

# The door (doors.py): each name the app imports from this package -> its module here.
_EXPORTS = {
    "Engine": "engine",
    **dict.fromkeys(["PrecisionRefused", "refuse_precision"], "hardware"),
    **dict.fromkeys(["WINDOW_STEP", "residue_window_start"], "windows"),
}
__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)
