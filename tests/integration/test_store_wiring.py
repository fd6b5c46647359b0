"""Every masked pass of the core, the command line and batch goes through the result store: rows
sent to the engine are counted at the class (whoever holds an engine), and what was masked once
for a model is never masked again, in this process or the next one."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from flamino_core import Engine, load_weights

from flamino_core.variants import substitution_maps as scores
from flamino_core.alphabet import AA_TO_IDX
from flamino_core.cli import main
from flamino_core.store.passes import Cancelled
from flamino_core.variants.notation import parse_mutations
from flamino_core.variants.scoring import score_variants

MODEL = "random:tiny:1"
REPO = Path(__file__).resolve().parents[2]


class MaskedRows:
    """Counts the masked positions sent to any ``Engine`` (the class method, wrapped)."""

    def __init__(self, monkeypatch):
        self.rows: list[int] = []
        inner = Engine.compute_masked

        def counted(engine, sequence, positions=None, progress=None):
            self.rows.extend(range(len(sequence)) if positions is None else positions)
            return inner(engine, sequence, positions, progress)

        monkeypatch.setattr(Engine, "compute_masked", counted)

    def take(self) -> int:
        count, self.rows = len(self.rows), []
        return count


@pytest.fixture(scope="module")
def engine():
    return Engine(load_weights(MODEL))


@pytest.fixture
def rows(monkeypatch):
    return MaskedRows(monkeypatch)


def test_variants_after_a_whole_sequence_scan_run_no_masked_pass(engine, rows, real_sequences):
    sequence = real_sequences["HBB_HUMAN"]
    scan = scores.substitution_map(engine, sequence, "masked-marginals")
    assert rows.take() == len(sequence)
    variants, issues = parse_mutations("E7V K8A:T12S G16D W15F", sequence)
    assert not issues
    for strategy in ("masked-marginals", "joint-masked"):
        result = score_variants(engine, sequence, variants, strategy)
        assert rows.take() == 0, strategy  # joint-masked runs only its one joint row (not a single-position pass)
        assert result.passes == 5 + (strategy == "joint-masked")  # what the score costs, stored passes included
    # The numbers are the scan's own: E7V is row 6, column V of the map.
    table = score_variants(engine, sequence, variants[:1]).table
    assert table.score[0] == pytest.approx(float(scan.substitutions[6, "ACDEFGHIKLMNPQRSTVWY".index("V")]), abs=1e-6)


def test_a_variant_list_first_then_the_scan_masks_only_the_other_positions(engine, rows, real_sequences):
    sequence = real_sequences["HBB_HUMAN"][:80]
    variants, _ = parse_mutations("E7V K8A", sequence)
    score_variants(engine, sequence, variants)
    assert rows.take() == 2
    scan = scores.substitution_map(engine, sequence, "pppl")
    assert rows.take() == len(sequence) - 2 and scan.pppl > 1


def test_pll_is_resumable_and_its_wild_type_is_the_scans(engine, rows, real_sequences):
    sequence = real_sequences["HBB_HUMAN"][:60]
    variants, _ = parse_mutations("E7V K8A G16D", sequence)
    scores.substitution_map(engine, sequence, "masked-marginals")  # the wild type's passes, stored
    rows.take()
    polls = []

    def cancel_after_two_chunks():
        polls.append(1)
        return len(polls) > 2

    with pytest.raises(Cancelled):
        score_variants(engine, sequence, variants, "pll", cancelled=cancel_after_two_chunks)
    ran = rows.take()
    assert ran == 2 * len(sequence)  # the wild type read, not run; two mutants (one chunk each), then stopped
    result = score_variants(engine, sequence, variants, "pll")
    assert rows.take() == 3 * len(sequence) - ran  # only what the cancelled run did not finish
    again = score_variants(engine, sequence, variants, "pll")
    assert rows.take() == 0
    np.testing.assert_array_equal(again.table.score, result.table.score)
    # Reference: PLL written out from the engine's own masked passes (no store); the HF
    # reference for pll is tests/parity/test_variant_scores.py's.
    def pll(s):
        log_probs = engine.compute_masked(s)
        return sum(float(log_probs[i, AA_TO_IDX[a]]) for i, a in enumerate(s))

    for v, score in zip(variants, result.table.score):
        # 2 x 60 float32 log-probabilities summed; batching changes each by rounding (~1e-6).
        assert score == pytest.approx(pll(v.apply(sequence)) - pll(sequence), abs=1e-4)


def test_an_unmasked_strategy_takes_positions_like_a_masked_one(engine, rows, real_sequences):
    sequence = real_sequences["HBB_HUMAN"][:50]
    whole = scores.substitution_map(engine, sequence, "wt-marginals")
    part = scores.substitution_map(engine, sequence, "wt-marginals", positions=range(10, 20))
    np.testing.assert_allclose(part.substitutions, whole.substitutions[10:20], atol=1e-6)
    assert part.sequence == sequence[10:20] and list(part.positions) == list(range(10, 20)) and part.pppl is None
    masked = scores.substitution_map(engine, sequence, "masked-marginals", positions=range(10, 20))
    assert rows.take() == 10 and masked.sequence == sequence[10:20] and masked.pppl > 1


def test_cli_commands_share_the_store(rows, real_sequences, tmp_path):
    sequence = real_sequences["HBB_HUMAN"][:70]
    fasta = tmp_path / "hbb.fa"
    fasta.write_text(f">HBB/11-80\n{sequence}\n")
    assert main(["variants", str(fasta), "-m", MODEL, "--mutations", "E16V", "-o", str(tmp_path / "v.csv")]) == 0
    assert rows.take() == 1  # one mutated position (E16 in the id's numbering is index 5)
    assert main(["score", str(fasta), "-m", MODEL, "-o", str(tmp_path / "s.csv")]) == 0
    assert rows.take() == len(sequence) - 1
    dms = tmp_path / "dms.csv"
    dms.write_text("mutant,DMS_score\nE16V,0.5\nK18A,-1.0\nG26D,0.1\n")
    assert main(["dms", str(dms), "--sequence", str(fasta), "-m", MODEL, "-o", str(tmp_path / "d.csv"),
                 "--metrics", str(tmp_path / "d.json")]) == 0
    assert rows.take() == 0
    written = {r["mutant"]: float(r["score"]) for r in csv.DictReader(open(tmp_path / "d.csv"))}
    variant = float(next(csv.DictReader(open(tmp_path / "v.csv")))["score"])
    assert written["E16V"] == pytest.approx(variant, abs=1e-5)


def test_flamino_score_numbers_positions_like_the_other_commands(tmp_path, real_sequences):
    sequence = real_sequences["HBB_HUMAN"][:12]
    fasta = tmp_path / "domain.fa"
    fasta.write_text(f">HBB_HUMAN/73-84\n{sequence}\n>plain\n{sequence}\n")
    out = tmp_path / "s.csv"
    assert main(["score", str(fasta), "-m", MODEL, "-o", str(out), "--strategy", "wt-marginals"]) == 0
    rows = list(csv.DictReader(open(out)))
    assert list(rows[0]) == ["record_id", "position", "wt", "mt", "score"]  # the columns, unchanged
    positions = {record: sorted({int(r["position"]) for r in rows if r["record_id"] == record})
                 for record in ("HBB_HUMAN/73-84", "plain")}
    assert positions == {"HBB_HUMAN/73-84": list(range(73, 85)), "plain": list(range(1, 13))}
    assert main(["score", str(fasta), "-m", MODEL, "-o", str(out), "--strategy", "wt-marginals", "--offset", "5"]) == 0
    rows = list(csv.DictReader(open(out)))
    assert sorted({int(r["position"]) for r in rows}) == list(range(5, 17))
    assert all(r["wt"] == sequence[int(r["position"]) - 5] for r in rows)


COUNTED_RUN = """
import json, sys
from flamino_core.engine.engine import Engine
from flamino_core.cli import main
sent = []
inner = Engine.compute_masked
def counted(engine, sequence, positions=None, progress=None):
    sent.extend(range(len(sequence)) if positions is None else positions)
    return inner(engine, sequence, positions, progress)
Engine.compute_masked = counted
status = main(sys.argv[1:])
print(json.dumps({"status": status, "rows": len(sent)}))
"""


def test_flamino_score_twice_runs_no_masked_pass_the_second_time(tmp_path, real_sequences):
    """Two processes, one FLAMINO_CACHE: the second ``flamino score`` reads every pass."""
    sequence = real_sequences["HBB_HUMAN"][:40]
    fasta = tmp_path / "hbb.fa"
    fasta.write_text(f">HBB\n{sequence}\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    outputs = []
    for run in range(2):
        out = tmp_path / f"s{run}.csv"
        done = subprocess.run([sys.executable, "-c", COUNTED_RUN, "score", str(fasta), "-m", MODEL, "-o", str(out)],
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        outputs.append((json.loads(done.stdout.strip().splitlines()[-1]), out.read_text()))
    assert [o[0] for o in outputs] == [{"status": 0, "rows": len(sequence)}, {"status": 0, "rows": 0}]
    assert outputs[0][1] == outputs[1][1]  # the same file, from the stored passes
