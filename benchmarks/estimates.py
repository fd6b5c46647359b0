"""Predicted against actual times of real jobs, run through the app as a user runs them (issue
#37, item 1): each job's cost model prediction at its start, its own estimate at 10% of its work
and the time it took, as ``Job.expect`` logs them into ``FLAMINO_CACHE/pass_rates.json``.

    .venv/bin/python benchmarks/estimates.py [--out docs-table.md] [--only KEY ...] [--rounds N]

``--only`` runs the scenarios of those keys (``entropy``, ``pppl``, ``dms``, ``fit``, ``fit-200``,
``pppl-8M``), in this order, each starting from the rates the ones run before it measured: issue 50's first
guesses are ``--only entropy pppl pppl-8M`` (a pass kind, then a model, never timed before) and
``--only fit fit-200``.

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
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


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
    args = parser.parse_args()
    known = [key for key, *_ in scenarios()]
    unknown = set(args.only or ()) - set(known)
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
            before = len(_history(rates_file))
            started = time.monotonic()
            drive()
            wall = time.monotonic() - started
            for entry in _history(rates_file)[before:]:
                rows.append((f"{name} [{'fresh process' if round_ == 1 else 'warm'}]", model, entry, wall))
                print(json.dumps({"scenario": name, "round": round_, "model": model, **entry}), flush=True)
    table = _table(rows)
    print(table)
    if args.out:
        args.out.write_text(table)


def _history(path: Path) -> list[dict]:
    try:
        return json.loads(path.read_text()).get("jobs", [])
    except (OSError, ValueError):
        return []


def _table(rows) -> str:
    lines = ["| job (model) | units | predicted at start | estimate at 10% | actual | actual / predicted | actual / at 10% |",
             "|---|---|---|---|---|---|---|"]
    small = [r for r in rows if max(r[2]["actual_s"], r[2]["predicted_s"]) < 1.0]
    for name, model, e, _ in rows:
        if max(e["actual_s"], e["predicted_s"]) < 1.0:
            continue  # a job of under a second (the stored records of the scenario before): listed by count
        at_tenth, actual, predicted = e.get("predicted_s_at_tenth"), e["actual_s"], e["predicted_s"]
        tenth = "—" if at_tenth is None else f"{at_tenth:.1f} s"
        tenth_ratio = "—" if not at_tenth else f"{actual / at_tenth:.2f}"
        ratio = f"{actual / predicted:.2f}" if predicted else "—"
        lines.append(
            f"| {name}: {e['title']} ({model}) | {e['units']:,} {e['unit']} | {predicted:.1f} s | {tenth} | "
            f"{actual:.1f} s | {ratio} | {tenth_ratio} |")
    machine = rows[0][2]["machine"] if rows else ""
    note = f"\n\n{len(small)} jobs of under a second are left out of the table." if small else ""
    return "\n".join(lines) + f"{note}\n\nMachine: {machine}.\n"


if __name__ == "__main__":
    main()
