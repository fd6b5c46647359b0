"""Issue #51's attacks on the core function each surface calls, with a hosted server's limits:
the seconds and the growth of this process's peak RSS until the refusal (or the read).

    .venv/bin/python benchmarks/hostile_tables.py ATTACK          # this checkout
    ROOT=/tmp/old .venv/bin/python benchmarks/hostile_tables.py ATTACK   # another tree's flamino_core
    timeout -s INT 120 ...                                         # stop a parse that never ends, still reporting

One attack per process (RSS peaks are per process). The files come from this checkout's
``tests/hostile_files.py`` whatever ROOT is, so a tree from before the change (``git archive
<commit> | tar -x -C /tmp/old``) is measured on the same bytes. ATTACK is one of ``ATTACKS``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path[:0] = [os.environ.get("ROOT", str(HERE)), str(HERE / "tests")]
import kind_folders  # noqa: E402,F401  (the test folders on the path: test modules' helpers)

import Bio.PDB  # noqa: E402,F401  (imported before the baseline, as a running server has them)
import pandas  # noqa: E402,F401
import psutil  # noqa: E402

import hostile_files  # noqa: E402
from flamino_core.inputs.tables import TableLimits  # noqa: E402

HOSTED = TableLimits(max_bytes=1_000_000, max_columns=200, max_rows=20_000, max_residues=2_000)
STRUCTURE = {"max_bytes": 5_000_000, "max_atoms": 100_000, "max_models": 100}
FOLDER = Path(tempfile.mkdtemp())


def _metadata(data: bytes):
    from flamino_core.inputs.fasta import parse_fasta_text
    from flamino_core.records.metadata import join_table

    records = parse_fasta_text(">x\nMKV\n").records
    try:
        return join_table(records, data, HOSTED)
    except TypeError:  # a tree before the limits reached join_table (the page checked the header only)
        return join_table(records, data)


def _structure(file: Path, copies: int = 1):
    import inspect

    from flamino_core.structure.files.reading import parse_structure_bytes

    data = file.read_bytes()
    chains = {"max_chains": 1_000} if "max_chains" in inspect.signature(parse_structure_bytes).parameters else {}
    return [parse_structure_bytes(data, file.name, **STRUCTURE, **chains).n_models for _ in range(copies)]


def _attack(name: str):
    from flamino_core.design import campaign
    from flamino_core.predictors.table import parse_labelled_table
    from flamino_core.variants.dms import parse_dms

    wide, commas = hostile_files.wide_row_table(FOLDER).read_bytes(), hostile_files.comma_table(FOLDER).read_bytes()
    old_mac = (HERE / "tests/data/dms/TCRG1_MOUSE_Rocklin_2023_1E0L.csv").read_text().replace("\n", "\r").encode()
    return {
        "predict-wide-row": lambda: parse_labelled_table(wide, "y", limits=HOSTED),
        "dms-commas": lambda: parse_dms(commas, limits=HOSTED),
        "metadata-commas": lambda: _metadata(hostile_files.comma_table(FOLDER, "id,taxon").read_bytes()),
        "design-wide-row": lambda: campaign.init(FOLDER / "c", "MKVLAAGIVG", "y").add_round(wide, "r.csv", HOSTED),
        "dms-cr-only": lambda: len(parse_dms(old_mac, limits=HOSTED).frame),
        "mmcif-15000-chains": lambda: _structure(hostile_files.many_chains_mmcif(FOLDER)),
        "mmcif-78000-atoms-x16": lambda: _structure(hostile_files.large_mmcif(FOLDER), 16),
    }[name] if name != "input-page-78000-atoms-x10" else _input_page(hostile_files.large_mmcif(FOLDER), 10)


def _input_page(file: Path, copies: int):
    """The Input page (AppTest, hosted, ``random:tiny``) started, and the run of one upload of
    ``copies`` copies of ``file``, named apart (the hosted page takes 10 files at a time), to time."""
    os.environ.update(FLAMINO_HOSTED="1", FLAMINO_MODEL="random:tiny", HF_HUB_OFFLINE="1",
                      FLAMINO_CACHE=tempfile.mkdtemp())
    tests = Path(sys.path[0]) / "tests"  # the measured tree's app.py (test_app.APP); its tests by kind
    sys.path[:0] = [str(tests / "app"), str(tests)]
    from test_app import start

    at = start()

    def upload() -> str:
        at.file_uploader[0].set_value([(f"copy{k}{''.join(file.suffixes)}", file.read_bytes(), "application/gzip")
                                       for k in range(copies)])
        at.run(timeout=900)
        return f"{len(at.error)} error message(s), exception: {bool(at.exception)}"

    return upload


ATTACKS = ("predict-wide-row", "dms-commas", "metadata-commas", "design-wide-row", "dms-cr-only",
           "mmcif-15000-chains", "mmcif-78000-atoms-x16", "input-page-78000-atoms-x10")


def main(name: str) -> None:
    attack = _attack(name)  # files written before the baseline
    process = psutil.Process()
    base = peak = process.memory_info().rss
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.02):
            peak = max(peak, process.memory_info().rss)

    threading.Thread(target=sample, daemon=True).start()
    started = time.perf_counter()
    try:
        outcome = f"read: {str(attack())[:80]}"
    except KeyboardInterrupt:
        outcome = "stopped (still parsing)"
    except ValueError as err:
        outcome = f"refused: {str(err)[:160]}"
    seconds = time.perf_counter() - started
    done.set()
    print(f"{name}: {seconds:.2f} s, peak RSS +{(peak - base) / 1e6:.0f} MB; {outcome}")


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ATTACKS:
        sys.exit(f"usage: hostile_tables.py ATTACK, one of {', '.join(ATTACKS)}")
    main(sys.argv[1])
