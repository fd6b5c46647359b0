"""Predicted against actual times of real jobs, run through the app as a user runs them (issue
#37, item 1): each job's cost model prediction at its start, its own estimate at 10% of its work
and the time it took, as ``Job.expect`` logs them into ``FLAMINO_CACHE/pass_rates.json``.

    .venv/bin/python benchmarks/estimates.py [--out docs-table.md] [--only KEY ...] [--rounds N]
        [--load N --loaded KEY ...]

``--only`` runs the scenarios of those keys (``entropy``, ``entropy-186``, ``pppl``, ``dms``, ``fit``,
``fit-200``, ``pppl-8M``), in this order, each starting from the rates the ones run before it measured: issue 50's first
guesses are ``--only entropy pppl pppl-8M`` (a pass kind, then a model, never timed before) and
``--only fit fit-200``. #66 D1's is ``--only entropy entropy-186``: the Records table of the 186 targets
with the rates the 40 measured.

``--load N`` starts N busy-loop processes (one core's worth each) before each scenario of ``--loaded``
(every one when not given) and stops them after it: a known background load on top of what the
machine already carries (other users: the load average before the loops is in the table).
``--settle-s`` (60) waits between starting them and the scenario, so the 1-minute load average the
estimate reads (``jobs/rates.load_share``) has risen with them. While a job runs, its countdown (what
its progress line shows, ``Job.countdown``) is read each second and set against the time it truly
had left when it ended: the table's worst ratio, over the readings with over 20 s left, and the
largest miss in seconds in the last 20 s.

The app runs in-process (Streamlit's AppTest, the same pages, jobs, store and rates as a browser
session) on untrained models of published shapes (``random:tiny``, ``random:esm2_t6_8M_UR50D``):
the times are this machine's for those shapes, never biology. Each scenario starts with an empty
result store and the rates the scenarios before it measured (as one server's day would), and
clicks every Start the page shows. Real inputs: ProteinGym targets (``../shared/fasta``) and the
NEIME assay (``../shared/dms``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import subprocess
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
import kind_folders  # noqa: E402,F401  (the test folders on the path: test modules' helpers)


def targets(low: int, high: int, count: int) -> str:
    """``count`` ProteinGym targets of ``low``-``high`` residues, in file order, as FASTA."""
    from flamino_core.inputs.fasta import read_fasta, to_fasta

    records = [r for r in read_fasta(SHARED / "fasta" / "proteingym_targets.fa").records if low <= len(r.sequence) <= high]
    return to_fasta(records[:count])


def scenarios():
    """(key, name, model, drive(at) -> at): each a page and the clicks a user makes."""
    from test_app import open_page, paste, settle, start

    assay = (SHARED / "dms" / "A0A1I9GEU1_NEIME_Kennouche_2019.csv").read_bytes()
    head = b"".join(assay.splitlines(keepends=True)[:61])  # 60 rows of the real assay

    def records(text: str, pppl: bool):
        def drive():
            at = settle(open_page(paste(start(), text), "records"), start=True)
            if pppl:
                at = settle(next(b for b in at.button if b.label == "Compute pseudo-perplexity").click().run(), start=True)
            return at
        return drive

    def dms():
        at = open_page(start(), "variants")
        at.radio(key="_w_vinput").set_value("dms").run()
        at.file_uploader(key="_dms_upload").set_value([("assay.csv", head, "text/csv")])
        at = settle(at.run())
        at.radio(key="_w_vstrategy").set_value("pll").run()
        return settle(at, start=True)

    def fit(data: bytes = assay):
        def drive():
            at = open_page(start(), "predict")
            at.file_uploader(key="_predict_upload").set_value([("assay.csv", data, "text/csv")])
            at = at.run()
            return settle(next(b for b in at.button if b.label == "Fit the predictor").click().run(), start=True)
        return drive

    set_40 = targets(150, 300, 40)
    return [
        ("entropy", "mean entropy, 40 ProteinGym targets (150-300 aa)", "random:tiny", records(set_40, pppl=False)),
        ("entropy-186", "mean entropy, the 186 ProteinGym targets (37-3,423 aa)", "random:tiny",
         records(targets(0, 10 ** 6, 186), pppl=False)),  # #66 D1's set
        ("pppl", "pseudo-perplexity, the same 40 targets", "random:tiny", records(set_40, pppl=True)),
        ("dms", "DMS pll, NEIME assay (60 rows, 161 aa)", "random:tiny", dms),
        ("fit", "fit on the NEIME assay (embedding, 5 folds)", "random:tiny", fit()),
        ("fit-200", "fit on 200 rows of the NEIME assay (embedding, 5 folds)", "random:tiny",
         fit(b"".join(assay.splitlines(keepends=True)[:201]))),  # issue 50 row 3's size
        ("pppl-8M", "pseudo-perplexity, 12 targets (50-90 aa)", "random:esm2_t6_8M_UR50D",
         records(targets(50, 90, 12), pppl=True)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the Markdown table here too")
    parser.add_argument("--rounds", type=int, default=2,
                        help="times each scenario runs: the first on a fresh process (every row shape compiles "
                             "once), the next with the shapes compiled and the rates measured, the store emptied")
    parser.add_argument("--only", nargs="+", metavar="KEY", help="run only these scenarios (keys: see the docstring)")
    parser.add_argument("--load", type=int, default=0, help="busy-loop processes run during the loaded scenarios")
    parser.add_argument("--loaded", nargs="+", metavar="KEY", help="the scenarios run under --load (default: all)")
    parser.add_argument("--settle-s", type=float, default=60.0,
                        help="seconds between starting the busy loops and the scenario")
    args = parser.parse_args()
    known = [key for key, *_ in scenarios()]
    unknown = (set(args.only or ()) | set(args.loaded or ())) - set(known)
    if unknown:
        parser.error(f"unknown scenario {', '.join(sorted(unknown))}: the keys are {', '.join(known)}")
    base = Path(tempfile.mkdtemp(prefix="flamino-estimates-"))
    os.environ["HF_HUB_OFFLINE"] = "1"
    rows, rates_file = [], None
    for round_ in range(1, args.rounds + 1):
        for index, (key, name, model, drive) in enumerate(scenarios()):
            if args.only and key not in args.only:
                continue
            from app_pages._ui.server import background

            background.forget_all()  # the session's finished jobs: each round starts its work again
            # A cache folder of its own (an empty result store: the whole work runs), with the
            # rates (and their history) the scenarios before it measured.
            cache = base / f"{round_}-{index}"
            cache.mkdir()
            if rates_file is not None:
                shutil.copy(rates_file, cache / "pass_rates.json")
            rates_file = cache / "pass_rates.json"
            os.environ.update({"FLAMINO_CACHE": str(cache), "FLAMINO_MODEL": model})
            loops = args.load if args.loaded is None or key in args.loaded else 0
            load_before = os.getloadavg()[0]  # (other users' load, before this run's loops)
            busy = _busy_loops(loops, args.settle_s)
            try:
                before = len(_history(rates_file))
                load = os.getloadavg()[0]
                started = time.monotonic()
                with _Countdowns() as countdowns:
                    drive()
                wall = time.monotonic() - started
            finally:
                for process in busy:  # only the loops this run started, by their own handles
                    process.kill()
                    process.wait()
            for entry in _history(rates_file)[before:]:
                worst, miss = countdowns.worst(entry["title"])
                entry = {**entry, "load_at_start": round(load, 1), "busy_loops": loops,
                         "load_before": round(load_before, 1),
                         "countdown_worst": None if worst is None else round(worst, 2),
                         "countdown_last_miss_s": None if miss is None else round(miss, 1),
                         "countdown": countdowns.readings(entry["title"])}
                rows.append((f"{name} [{'fresh process' if round_ == 1 else 'warm'}]", model, entry, wall))
                print(json.dumps({"scenario": name, "round": round_, "model": model, **entry}), flush=True)
    table = _table(rows)
    print(table)
    if args.out:
        args.out.write_text(table)


def _busy_loops(count: int, settle_s: float) -> list[subprocess.Popen]:
    """``count`` processes spinning on a core each, started ``settle_s`` before returning."""
    if not count:
        return []
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    time.sleep(settle_s)
    return loops


class _Countdowns:
    """While the scenario runs, each running job's countdown (``Job.countdown``, what its progress
    line says) read every second; ``worst(title)``: its worst ratio to the time the job truly had
    left (either way), over the readings with over ``MIN_LEFT_S`` left, and the largest miss in seconds
    after (a job's last seconds are said in 10-second steps, ``jobs/status.about``: 5 s shown for 11 s
    left is a ratio of 2 that no one reads as one)."""

    MIN_LEFT_S = 20.0

    def __init__(self):
        self._readings: dict[int, tuple[object, list[tuple[float, float]]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _read(self) -> None:
        from app_pages._ui.server import background

        while not self._stop.wait(1.0):
            for job in background.every_job():
                if job.finished:
                    continue
                left = job.status().seconds_left
                if left is not None:
                    self._readings.setdefault(job.id, (job, []))[1].append((time.monotonic(), left))

    def readings(self, title: str) -> list[tuple[float, float, float]]:
        """(seconds since the job began, shown, truly left) of each reading of the jobs of ``title``."""
        return [(round(at - job.created, 1), round(shown, 1), round(job.finished_at - at, 1))
                for job, readings in self._readings.values() if job.title == title and job.finished_at
                for at, shown in readings]

    def worst(self, title: str) -> tuple[float | None, float | None]:
        """(the worst ratio, either way, over the readings with over ``MIN_LEFT_S`` left; the
        largest miss in seconds over the readings after) of the jobs of ``title``."""
        ratios, misses = [], []
        for _, shown, left in self.readings(title):
            if left > self.MIN_LEFT_S:
                ratios.append(max(shown / left, left / max(shown, 1e-9)))
            else:
                misses.append(abs(shown - left))
        return max(ratios, default=None), max(misses, default=None)


def _history(path: Path) -> list[dict]:
    try:
        return json.loads(path.read_text()).get("jobs", [])
    except (OSError, ValueError):
        return []


def _table(rows) -> str:
    lines = ["| job (model) | units | load at start (busy loops) | predicted at start | estimate at 10% | actual | "
             "actual / predicted | actual / at 10% | countdown's worst ratio (over 20 s left) | its worst miss after |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    small = [r for r in rows if max(r[2]["actual_s"], r[2]["predicted_s"]) < 1.0]
    for name, model, e, _ in rows:
        if max(e["actual_s"], e["predicted_s"]) < 1.0:
            continue  # a job of under a second (the stored records of the scenario before): listed by count
        at_tenth, actual, predicted = e.get("predicted_s_at_tenth"), e["actual_s"], e["predicted_s"]
        tenth = "—" if at_tenth is None else f"{at_tenth:.1f} s"
        tenth_ratio = "—" if not at_tenth else f"{actual / at_tenth:.2f}"
        ratio = f"{actual / predicted:.2f}" if predicted else "—"
        load = (f"{e['load_before']} + {e['busy_loops']} loops: {e['load_at_start']}" if e["busy_loops"]
                else f"{e['load_at_start']}")
        worst = "—" if e["countdown_worst"] is None else f"{e['countdown_worst']:.2f}"
        miss = "—" if e["countdown_last_miss_s"] is None else f"{e['countdown_last_miss_s']:.1f} s"
        lines.append(
            f"| {name}: {e['title']} ({model}) | {e['units']:,} {e['unit']} | {load} | {predicted:.1f} s | {tenth} | "
            f"{actual:.1f} s | {ratio} | {tenth_ratio} | {worst} | {miss} |")
    machine = rows[0][2]["machine"] if rows else ""
    note = f"\n\n{len(small)} jobs of under a second are left out of the table." if small else ""
    return "\n".join(lines) + f"{note}\n\nMachine: {machine}.\n"


if __name__ == "__main__":
    main()
