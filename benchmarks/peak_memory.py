"""Where a process's memory goes while it loads a model and runs one protein (docs/benchmarks.md,
"Memory"): the resident set after each step and the highest one sampled every 5 ms during it.

Run it twice on the same ``FLAMINO_CACHE``: the first converts the checkpoint (and peaks at two
copies of the weights), the second is the warm start users get. To compare two trees, run it
with ``PYTHONPATH`` set to each, alternating. Usage::

    FLAMINO_CACHE=/tmp/cache .venv/bin/python benchmarks/peak_memory.py CHECKPOINT_DIR
"""

from __future__ import annotations

import os
import sys
import threading
import time

PAGE = os.sysconf("SC_PAGE_SIZE")
# One protein of 300 residues (ProteinGym's first targets are 150-400), as make bench's latency.
PROTEIN = ("MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRVGDGTQDNLSGAEKAVQVKVKALPDAQFEVVHSLAKWKRQTLGQHDFSAGEGLYT"
           "HMKALRPDEDRLSPLHSVYVDQWDWERVMGDGERQFSTLKSTVEAIWAGIKATEAAVSEEFGLAPFLPDQIHFVHSQELLSRYPDLDAKGRER"
           "AIAKDLGAVFLVGIGGKLSDGHRHDVRAPDYDDWMKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRVGDGTQDNLSGAEKAVQVKVKAL"
           "PDAQFEVVHSLAKW")[:300]


def resident_gib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE / 2**30


def main() -> None:
    highest = [0.0]

    def sample() -> None:
        while True:
            highest[0] = max(highest[0], resident_gib())
            time.sleep(0.005)

    threading.Thread(target=sample, daemon=True).start()

    def step(name: str) -> None:
        time.sleep(0.05)  # one more sample after the step
        print(f"{name:8s} resident {resident_gib():.2f} GiB, highest during it {highest[0]:.2f} GiB", flush=True)
        highest[0] = 0.0

    from flamino_core import Engine, load_weights
    step("imports")
    weights = load_weights(sys.argv[1])
    step("load")
    engine = Engine(weights)
    del weights  # as the CLI and the app hold it: not beyond the engine
    step("engine")
    for name in ("run 1", "run 2"):
        engine.run([PROTEIN], repr_layers=(), logits=True)
        step(name)


if __name__ == "__main__":
    main()
