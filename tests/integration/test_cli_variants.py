"""``flamino variants`` and ``flamino dms`` on the real shared files (HBB_HUMAN, the ProteinGym
assay), checked against HF transformers' masked passes on the same random checkpoint and the
metrics against scipy / scikit-learn computed here."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
import torch
from sklearn.metrics import matthews_corrcoef, ndcg_score, roc_auc_score

from flamino_core.alphabet import MASK_IDX, batch_encode
from flamino_core.cli import main
from flamino_core.inputs.fasta import read_fasta
from conftest import TINY
from reference_checkpoints import hf_forward

DMS_DIR = Path(__file__).resolve().parents[3] / "shared" / "dms"
ASSAY = DMS_DIR / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"
# The parity bound (tests/parity/test_parity.py: 1e-4 on log-probabilities) plus the CSV's rounding:
# scores are written with 6 significant digits, half a unit of the last one is 5e-6 x |score|.
ATOL = 1e-4


def close(written: str, reference: float) -> bool:
    return abs(float(written) - reference) <= ATOL + 5e-6 * abs(reference)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A random tiny checkpoint in the HF 5.x format and the PyTorch model it holds."""
    from reference_checkpoints import make_hf_model, write_hf_5x

    from conftest import _eager, checkpoint_seed

    model = make_hf_model(TINY, seed=checkpoint_seed(TINY.name, "cli-variants"))
    directory = tmp_path_factory.mktemp("hf-tiny")
    write_hf_5x(model, directory)
    return str(directory), _eager(model)


@pytest.fixture(scope="module")
def hbb(shared_fasta):
    path = shared_fasta / "HBB_HUMAN.fa"
    return path, read_fasta(path).records[0].sequence


def esm_index(letter: str) -> int:
    import esm  # fair-esm's alphabet, independent of ours

    return esm.data.Alphabet.from_architecture("ESM-1b").get_idx(letter)


def hf_masked(hf, sequence: str, masked_sets: list[list[int]]) -> list[np.ndarray]:
    """HF log-softmax at the masked positions, row r masking every 0-based index of set r."""
    tokens = np.repeat(batch_encode([sequence]), len(masked_sets), axis=0)
    for row, masked in enumerate(masked_sets):
        tokens[row, np.array(masked) + 1] = MASK_IDX
    log_probs = torch.log_softmax(hf_forward(hf, tokens).logits.double(), -1).numpy()
    return [log_probs[row, np.array(masked) + 1] for row, masked in enumerate(masked_sets)]


def hf_additive(hf, sequence: str, changes: list[tuple[int, str, str]]) -> float:
    """sum of log p(mt) - log p(wt), each 0-based index masked alone (HF)."""
    at = hf_masked(hf, sequence, [[i] for i, _, _ in changes])
    return sum(float(lp[0, esm_index(mt)] - lp[0, esm_index(wt)]) for lp, (_, wt, mt) in zip(at, changes))


def rows_of(path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def header_of(path) -> list[str]:
    with open(path, newline="") as handle:
        return next(csv.reader(handle))


# --- flamino variants ------------------------------------------------------------------------------
def test_variants_scores_match_hf_in_input_order_and_name_the_skipped(checkpoint, hbb, tmp_path, capsys):
    directory, hf = checkpoint
    fasta, seq = hbb
    assert seq[5] == "E" and seq[7] == "K" and seq[16] == "K"  # E6 (HbS when counted without Met), K8, K17
    out = tmp_path / "hbb.csv"
    entries = "E6V, p.[Glu6Val;Lys8Ala], E6*, A6V, K17E:E6V, p.Lys8del, V1A"
    code = main(["variants", str(fasta), "--mutations", entries, "-m", directory, "-o", str(out)])
    assert code == 0
    assert header_of(out) == ["record_id", "mutant", "score", "status"]
    rows = rows_of(out)
    assert [r["mutant"] for r in rows] == [e.strip() for e in entries.split(",")]
    assert {r["record_id"] for r in rows} == {"HBB_HUMAN"}
    expected = {
        "E6V": [(5, "E", "V")],
        "p.[Glu6Val;Lys8Ala]": [(5, "E", "V"), (7, "K", "A")],
        "K17E:E6V": [(16, "K", "E"), (5, "E", "V")],
        "V1A": [(0, "V", "A")],
    }
    for row in rows:
        if row["mutant"] in expected:
            assert row["status"] == "ok"
            assert close(row["score"], hf_additive(hf, seq, expected[row["mutant"]])), row
        else:
            assert row["score"] == "" and row["status"] != "ok"
    status = {r["mutant"]: r["status"] for r in rows}
    assert "stop" in status["E6*"] and "has E at position 6, not A" in status["A6V"]
    assert "only substitutions" in status["p.Lys8del"]
    err = capsys.readouterr().err
    for bad in ("E6*", "A6V", "p.Lys8del"):
        assert any(bad in line and "skipped" in line for line in err.splitlines()), bad
    assert "HBB_HUMAN: 4/4 (100%)" in err  # progress: 4 distinct positions, 4 masked passes
    assert "Traceback" not in err


def test_variants_joint_masked_adds_non_additivity_against_hf(checkpoint, hbb, tmp_path):
    directory, hf = checkpoint
    fasta, seq = hbb
    out = tmp_path / "joint.csv"
    assert main(["variants", str(fasta), "--mutations", "E6V:K8A\nV1A", "--strategy", "joint-masked",
                 "-m", directory, "-o", str(out)]) == 0
    assert header_of(out) == ["record_id", "mutant", "score", "non_additivity", "status"]
    double, single = rows_of(out)
    (together,) = hf_masked(hf, seq, [[5, 7]])
    joint = float(together[0, esm_index("V")] - together[0, esm_index("E")]
                  + together[1, esm_index("A")] - together[1, esm_index("K")])
    additive = hf_additive(hf, seq, [(5, "E", "V"), (7, "K", "A")])
    assert close(double["score"], joint)
    assert close(double["non_additivity"], joint - additive)
    assert abs(joint - additive) > 1e-3  # the joint pass is a different input: the check can fail
    assert close(single["score"], hf_additive(hf, seq, [(0, "V", "A")])) and float(single["non_additivity"]) == 0


def test_variants_wt_marginals_and_pll(checkpoint, hbb, tmp_path):
    directory, hf = checkpoint
    _, seq = hbb
    short = seq[:40]
    fasta = tmp_path / "short.fa"
    fasta.write_text(f">hbb40\n{short}\n")
    out = tmp_path / "wt.csv"
    assert main(["variants", str(fasta), "--mutations", "E6V V1A:K8A", "--strategy", "wt-marginals",
                 "-m", directory, "-o", str(out)]) == 0
    unmasked = torch.log_softmax(hf_forward(hf, batch_encode([short])).logits.double(), -1).numpy()[0, 1:-1]
    first, second = rows_of(out)
    assert close(first["score"], unmasked[5, esm_index("V")] - unmasked[5, esm_index("E")])
    assert close(second["score"], unmasked[0, esm_index("A")] - unmasked[0, esm_index("V")]
                 + unmasked[7, esm_index("A")] - unmasked[7, esm_index("K")])

    def hf_pll(sequence: str) -> float:
        at = hf_masked(hf, sequence, [[i] for i in range(len(sequence))])
        return sum(float(at[i][0, esm_index(aa)]) for i, aa in enumerate(sequence))

    out = tmp_path / "pll.csv"
    assert main(["variants", str(fasta), "--mutations", "E6V", "--strategy", "pll", "-m", directory,
                 "-o", str(out)]) == 0
    (row,) = rows_of(out)
    mutant = short[:5] + "V" + short[6:]
    # Two sums of 40 log-probabilities: up to 80 rounding terms, so 10x the bound (as test_variant_scores).
    assert abs(float(row["score"]) - (hf_pll(mutant) - hf_pll(short))) < 10 * ATOL


def test_variants_offset_from_the_id_and_from_the_option(checkpoint, hbb, tmp_path, capsys):
    directory, hf = checkpoint
    _, seq = hbb
    fasta = tmp_path / "numbered.fa"
    fasta.write_text(f">HBB_HUMAN/11-{10 + len(seq)}\n{seq}\n")
    out = tmp_path / "numbered.csv"
    # Numbered from 11 by its id: E16V is the sixth residue, and position 6 is outside the record.
    assert main(["variants", str(fasta), "--mutations", "E16V,E6V", "-m", directory, "-o", str(out)]) == 0
    shifted, unshifted = rows_of(out)
    assert shifted["record_id"] == f"HBB_HUMAN/11-{10 + len(seq)}"
    assert shifted["status"] == "ok" and close(shifted["score"], hf_additive(hf, seq, [(5, "E", "V")]))
    assert unshifted["status"] != "ok" and "position 6" in unshifted["status"]
    assert "numbering starts at 11" in capsys.readouterr().err
    # --offset overrides the id: back to 1-based numbering.
    assert main(["variants", str(fasta), "--mutations", "E16V,E6V", "--offset", "1", "-m", directory,
                 "-o", str(out)]) == 0
    shifted, unshifted = rows_of(out)
    assert shifted["status"] != "ok" and unshifted["status"] == "ok"
    assert close(unshifted["score"], hf_additive(hf, seq, [(5, "E", "V")]))


def test_variants_reads_a_csv_file_and_standard_input(checkpoint, hbb, tmp_path, monkeypatch):
    directory, _ = checkpoint
    fasta, _ = hbb
    table = tmp_path / "list.csv"
    table.write_text("mutant,label\nE6V,pathogenic\nV1A,benign\nX9Q,odd\n")
    from_file = tmp_path / "file.csv"
    assert main(["variants", str(fasta), "--mutations", str(table), "-m", directory, "-o", str(from_file)]) == 0
    rows = rows_of(from_file)
    assert [r["mutant"] for r in rows] == ["E6V", "V1A", "X9Q"]
    assert rows[2]["status"].startswith("line 4:")  # a table's entries are named by line

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"E6V\nV1A\nX9Q\n")))
    from_stdin = tmp_path / "stdin.csv"
    assert main(["variants", str(fasta), "--mutations", "-", "-m", directory, "-o", str(from_stdin)]) == 0
    assert [(r["mutant"], r["score"]) for r in rows_of(from_stdin)][:2] == [(r["mutant"], r["score"]) for r in rows[:2]]


def test_variants_exit_2_when_nothing_can_be_scored(checkpoint, hbb, tmp_path, capsys):
    directory, _ = checkpoint
    fasta, _ = hbb
    out = tmp_path / "none.csv"
    assert main(["variants", str(fasta), "--mutations", "A6V E6*", "-m", directory, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "nothing could be scored" in err and "Traceback" not in err
    assert [r["status"] != "ok" for r in rows_of(out)] == [True, True]  # the reasons are still written
    assert main(["variants", str(fasta), "--mutations", " ,, ", "-m", directory, "-o", str(out)]) == 2
    assert "no variants" in capsys.readouterr().err
    assert main(["variants", str(fasta), "--mutations", str(tmp_path / "typo.csv"), "-m", directory,
                 "-o", str(out)]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["variants", str(fasta), "--mutations", "E6V", "--strategy", "pppl", "-o", str(out)]) == 2
    assert main(["variants", str(fasta), "--mutations", "E6V", "-o", str(tmp_path / "out.tsv")]) == 2


# --- flamino dms -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def assay():
    if not ASSAY.exists():
        pytest.skip(f"the ProteinGym assay is not at {ASSAY}")
    return ASSAY, read_fasta(ASSAY.with_suffix(".wt.fa")).records[0].sequence


def reference_metrics(true: np.ndarray, pred: np.ndarray, bins: np.ndarray) -> dict:
    """ProteinGym's definitions, from the libraries it calls (and numpy for the top-10% recall)."""
    top_true = true > np.percentile(true, 90)
    top_pred = pred > np.percentile(pred, 90)
    gains = (true - true.min()) / (true.max() - true.min())
    return {
        "spearman": scipy.stats.spearmanr(true, pred).statistic,
        "auc": roc_auc_score(bins, pred),
        "mcc": matthews_corrcoef(bins, (pred >= np.median(pred)).astype(int)),
        # scikit-learn's NDCG equals ProteinGym's quantile NDCG when the scores have no ties.
        "ndcg": ndcg_score(gains[None, :], pred[None, :], k=len(true) // 10),
        "top10_recall": (top_true & top_pred).sum() / top_true.sum(),
    }


def test_dms_on_the_real_assay_scores_and_metrics(checkpoint, assay, tmp_path, capsys):
    directory, hf = checkpoint
    path, wild_type = assay
    out, metrics_path = tmp_path / "scored.csv", tmp_path / "metrics.json"
    assert main(["dms", str(path), "--sequence", str(path.with_suffix(".wt.fa")), "-m", directory,
                 "-o", str(out), "--metrics", str(metrics_path)]) == 0
    with open(path, newline="") as handle:
        original = list(csv.DictReader(handle))
    rows = rows_of(out)
    assert header_of(out) == ["mutant", "mutated_sequence", "DMS_score", "DMS_score_bin", "score", "status"]
    # Every input column exactly as the file has it (values not re-formatted), row for row.
    assert [{k: r[k] for k in original[0]} for r in rows] == original
    assert all(r["status"] == "ok" for r in rows)

    # Scores: HF with each mutated position masked (all 161 positions of this assay in one batch).
    positions = sorted({int(r["mutant"][1:-1]) - 1 for r in rows})
    masked = dict(zip(positions, hf_masked(hf, wild_type, [[p] for p in positions])))
    for row in rows[::7]:
        i, wt, mt = int(row["mutant"][1:-1]) - 1, row["mutant"][0], row["mutant"][-1]
        assert close(row["score"], float(masked[i][0, esm_index(mt)] - masked[i][0, esm_index(wt)])), row

    metrics = json.loads(metrics_path.read_text())
    assert list(metrics) == ["spearman", "auc", "mcc", "ndcg", "top10_recall", "n_scored", "n_skipped",
                             "n_excluded", "model", "strategy"]
    assert metrics["n_scored"] == 922 and metrics["n_skipped"] == 0 and metrics["n_excluded"] == 0
    assert metrics["model"] == directory and metrics["strategy"] == "masked-marginals"
    true = np.array([float(r["DMS_score"]) for r in rows])
    pred = np.array([float(r["score"]) for r in rows])  # as written (6 digits): ties as the reader sees them
    bins = np.array([int(r["DMS_score_bin"]) for r in rows])
    assert len(np.unique(pred)) == len(pred)  # no ties, so scikit-learn's NDCG is ProteinGym's
    for key, value in reference_metrics(true, pred, bins).items():
        # The JSON comes from the unrounded scores. Rounding to 6 digits is monotonic, so without
        # ties (checked above) it keeps every rank and every "above the median / 90th percentile"
        # set: all five statistics are the same numbers, to float precision.
        assert math.isclose(metrics[key], value, abs_tol=1e-9), (key, metrics[key], value)
    err = capsys.readouterr().err
    assert "161/161 (100%)" in err  # progress over the 161 masked passes


def test_dms_derived_wild_type_offset_and_singles_only(checkpoint, assay, tmp_path, capsys):
    directory, _ = checkpoint
    path, wild_type = assay
    derived, metrics_path = tmp_path / "derived.csv", tmp_path / "m.json"
    # A small table numbered from 101 (a domain cut from a longer entry), with two multi-mutants,
    # a missing DMS_score and a wrong wild-type letter.
    lines = ["mutant,DMS_score,DMS_score_bin"]
    singles = [(f"{wild_type[i]}{i + 101}{'A' if wild_type[i] != 'A' else 'G'}", float(i % 7) - 3, i % 2)
               for i in range(0, 60, 3)]
    lines += [f"{m},{s},{b}" for m, s, b in singles]
    lines += [f"{singles[0][0]}:{singles[1][0]},-4.5,0", f"{singles[2][0]}:{singles[3][0]},2.5,1",
              f"{singles[4][0]},,1", f"W{101 + 1}A,1.0,1" if wild_type[1] != "W" else "W102Y,1.0,1"]
    table = tmp_path / "small.csv"
    table.write_text("\n".join(lines) + "\n")
    fasta = tmp_path / "wt.fa"
    fasta.write_text(f">PILA_NEIME/101-{100 + len(wild_type)}\n{wild_type}\n")
    assert main(["dms", str(table), "--sequence", str(fasta), "-m", directory, "-o", str(derived),
                 "--metrics", str(metrics_path)]) == 0
    err = capsys.readouterr().err
    assert "numbering starts at 101" in err
    assert "line 25: skipped" in err and "not W" in err  # the wrong wild type, named by its line
    rows = rows_of(derived)
    assert [r["mutant"] for r in rows] == [line.split(",")[0] for line in lines[1:]]
    score = {r["mutant"]: float(r["score"]) for r in rows if r["status"] == "ok"}
    for multi in (lines[21], lines[22]):  # additive: the sum of its singles
        mutant = multi.split(",")[0]
        assert math.isclose(score[mutant], sum(score[m] for m in mutant.split(":")), abs_tol=1e-4)
    metrics = json.loads(metrics_path.read_text())
    assert metrics["n_scored"] == 22 and metrics["n_skipped"] == 2  # the missing DMS_score, the wrong letter

    assert main(["dms", str(table), "--sequence", str(fasta), "--singles-only", "-m", directory,
                 "-o", str(derived), "--metrics", str(metrics_path)]) == 0
    metrics = json.loads(metrics_path.read_text())
    # --singles-only: the 2 usable multi-mutants are excluded by choice, the 2 bad rows skipped
    assert metrics["n_scored"] == 20 and metrics["n_skipped"] == 2 and metrics["n_excluded"] == 2
    single_rows = rows[:20]
    true = np.array([float(r["DMS_score"]) for r in single_rows])
    pred = np.array([float(r["score"]) for r in single_rows])
    assert math.isclose(metrics["spearman"], scipy.stats.spearmanr(true, pred).statistic, abs_tol=1e-9)
    # --offset instead of the id: the same numbers.
    plain = tmp_path / "plain.fa"
    plain.write_text(f">wt\n{wild_type}\n")
    again = tmp_path / "again.csv"
    assert main(["dms", str(table), "--sequence", str(plain), "--offset", "101", "-m", directory,
                 "-o", str(again), "--metrics", str(metrics_path)]) == 0
    assert [r["score"] for r in rows_of(again)] == [r["score"] for r in rows]


def test_dms_exit_2_with_a_message(checkpoint, assay, tmp_path, capsys):
    directory, wild_type = checkpoint[0], assay[1]
    out, metrics_path = tmp_path / "o.csv", tmp_path / "m.json"
    no_score = tmp_path / "no_score.csv"
    no_score.write_text("mutant,fitness\nF1A,1\n")
    assert main(["dms", str(no_score), "-m", directory, "-o", str(out), "--metrics", str(metrics_path)]) == 2
    assert "DMS_score" in capsys.readouterr().err
    no_wild_type = tmp_path / "no_wt.csv"
    no_wild_type.write_text("mutant,DMS_score\nF1A,1\n")
    assert main(["dms", str(no_wild_type), "-m", directory, "-o", str(out), "--metrics", str(metrics_path)]) == 2
    assert "give the wild-type sequence" in capsys.readouterr().err
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("mutant,DMS_score\nA1V,1\nA2V,2\n")  # the wild type starts FT, not AA
    fasta = tmp_path / "wt.fa"
    fasta.write_text(f">wt\n{wild_type}\n")
    assert main(["dms", str(wrong), "--sequence", str(fasta), "-m", directory, "-o", str(out),
                 "--metrics", str(metrics_path)]) == 2
    assert "nothing could be scored" in capsys.readouterr().err
    assert json.loads(metrics_path.read_text())["n_scored"] == 0  # the JSON is still written
    two = tmp_path / "two.fa"
    two.write_text(f">a\n{wild_type}\n>b\n{wild_type}\n")
    assert main(["dms", str(wrong), "--sequence", str(two), "-m", directory, "-o", str(out),
                 "--metrics", str(metrics_path)]) == 2
    assert "one wild-type sequence" in capsys.readouterr().err
    assert main(["dms", str(wrong), "-m", directory, "-o", str(out), "--metrics", str(tmp_path / "m.txt")]) == 2
