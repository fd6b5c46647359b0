"""Model work planned and run in the background: ``plan`` (the passes a request still needs,
their cost, its chunks), ``background`` (a job: progress, cancel, partial results), ``metered``
(an engine timed into ``rates``), ``pass_cost``, ``status`` (a job's state in words), Ray, the
queue heavy jobs wait in (``heavy_queue``, its order ``queue_order``).
"""

from __future__ import annotations

from flamino_core.doors import lazy_door

# The door (doors.py): each name the app imports from this package -> its module here.
_EXPORTS = {
    **dict.fromkeys(["CANCELLED", "DONE", "FAILED", "Job", "MEASURED", "STOPPED", "Stopped",
                     "start"], "background"),
    **dict.fromkeys(["HeavyJobQueue", "Turn"], "heavy_queue"),
    **dict.fromkeys(["QueueFull", "VisitorBusy", "jobs", "ordinal"], "queue_order"),
    "MeteredEngine": "metered",
    **dict.fromkeys(["masked_seconds", "unmasked_seconds"], "pass_cost"),
    **dict.fromkeys(["MaskedScan", "MaskedSet", "Plan", "SetOutputs", "stored_outputs"], "plan"),
    "default_rates": "rates",
    "about": "status",
}
__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)
