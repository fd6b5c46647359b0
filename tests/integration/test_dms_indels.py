"""A DMS table in ProteinGym's indel layout (``mutated_sequence``, ``DMS_score``, ``DMS_score_bin``,
no ``mutant`` column) through ``flamino dms`` (issue #38, item 3).

No ProteinGym indel assay can be obtained on the test machines (ProteinGym ships its assays as an
archive outside its repository), so ``indel_table`` builds one from a real protein, CBX4_HUMAN's
ProteinGym target sequence (50 residues, ``../shared/fasta/proteingym_targets.fa``): every
single-residue deletion, an insertion of G after each of the first 20 residues, 8 substitutions,
5 deletion-insertions (PW over two residues), a repeated row, a row with a non-standard residue and one without a
DMS_score. Its DMS_score is synthetic (seeded noise minus half the change in length): the table
checks reading, scoring and the metrics, not biology. The metrics are checked against
ProteinGym's own functions, written again in tests/unit/test_dms_proteingym.py.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from flamino_core import Engine, load_weights
from flamino_core.cli import main
from flamino_core.variants.dms import DmsError, parse_dms, read_dms, score_dms
from flamino_core.variants.figures import dms_scatter
from flamino_core.variants.metrics import dms_metrics
from test_dms_proteingym import proteingym_metrics

STRATEGY = "wt-pll-approx"  # one unmasked pass per row: the table's 86 sequences in seconds


def indel_table(wild: str) -> pd.DataFrame:
    """The table described in the module docstring, rows in a fixed order, scores from seed 38."""
    mutated = [wild[:i] + wild[i + 1:] for i in range(len(wild))]
    mutated += [wild[:i + 1] + "G" + wild[i + 1:] for i in range(20)]
    mutated += [wild[:i] + ("A" if wild[i] != "A" else "W") + wild[i + 1:] for i in range(3, 50, 6)]
    mutated += [wild[:i] + "PW" + wild[i + 2:] for i in (5, 15, 25, 35, 45)]
    rng = np.random.default_rng(38)
    scores = np.round(rng.normal(size=len(mutated)) - 0.5 * np.abs([len(m) - len(wild) for m in mutated]), 4)
    frame = pd.DataFrame({"mutated_sequence": mutated, "DMS_score": scores})
    frame["DMS_score_bin"] = (frame["DMS_score"] >= frame["DMS_score"].median()).astype(int)
    extra = pd.DataFrame({"mutated_sequence": [mutated[0], wild[:10] + "B" + wild[11:], mutated[1]],
                          "DMS_score": [9.0, 0.0, np.nan], "DMS_score_bin": [1, 0, 0]})
    return pd.concat([frame, extra], ignore_index=True)


@pytest.fixture(scope="module")
def cbx4(real_sequences):
    wild = real_sequences["CBX4_HUMAN"]
    assert len(wild) == 50
    return wild, indel_table(wild)


def test_the_indel_layout_needs_its_wild_type(cbx4):
    wild, table = cbx4
    with pytest.raises(DmsError, match=re.escape("(ProteinGym's indel layout): give its wild type as FASTA")):
        parse_dms(table.to_csv(index=False))
    dms = parse_dms(table.to_csv(index=False), wild)
    assert dms.by_sequence and "on more than one row" in " ".join(dms.issues)


def distinct_usable(table: pd.DataFrame) -> pd.DataFrame:
    """The rows the statistics should use, chosen here with pandas: standard residues only, the
    first row of each mutated sequence (deleting either residue of a pair like LL gives one
    sequence), a DMS_score present."""
    valid = table[~table["mutated_sequence"].str.contains("B")]
    first = valid.drop_duplicates("mutated_sequence", keep="first")
    return first[first["DMS_score"].notna()]


def test_flamino_dms_scores_an_indel_table_and_its_metrics_are_proteingyms(cbx4, tmp_path, capsys):
    wild, table = cbx4
    csv, fasta = tmp_path / "CBX4_indels.csv", tmp_path / "cbx4.fa"
    table.to_csv(csv, index=False)
    fasta.write_text(f">CBX4_HUMAN\n{wild}\n")
    out, metrics_path = tmp_path / "scored.csv", tmp_path / "metrics.json"
    refused = main(["dms", str(csv), "--sequence", str(fasta), "-m", "random:tiny", "-o", str(out),
                    "--metrics", str(metrics_path)])  # masked-marginals, the default, scores substitutions only
    assert refused == 2 and "score them with --strategy pll or" in capsys.readouterr().err and not out.exists()
    code = main(["dms", str(csv), "--sequence", str(fasta), "--strategy", STRATEGY, "-m", "random:tiny",
                 "-o", str(out), "--metrics", str(metrics_path)])
    assert code == 0
    err = capsys.readouterr().err
    expected = distinct_usable(table)
    assert f"{STRATEGY}: {len(expected) + 1} unmasked passes: 1 of the wild type" in err  # and each sequence
    written = pd.read_csv(out)
    assert list(written.columns) == ["mutated_sequence", "DMS_score", "DMS_score_bin", "score", "status"]
    assert (written.status == "ok").sum() == len(table) - 1 and "'B' is not one" in written.status[len(table) - 2]
    metrics = json.loads(metrics_path.read_text())

    # The same scoring in this process, and ProteinGym's functions on the rows the statistics use:
    # scored, with a DMS_score, the first row of a repeated sequence.
    scored = score_dms(Engine(load_weights("random:tiny")), read_dms(csv, wild), STRATEGY)
    used = scored.frame[scored.rows_used()]
    assert list(used.index) == list(expected.index)
    np.testing.assert_allclose(written.score[used.index], used.score, rtol=1e-5)  # the CSV's 6 digits
    merged = used.assign(DMS_score=used["DMS_score"].astype(float), score=used["score"].astype(float))
    theirs = proteingym_metrics(merged, "score")
    ours = dms_metrics(scored, model="random:tiny")
    for key, value in theirs.items():
        assert ours[key] == float(value), key  # the same float
        assert metrics[key] == pytest.approx(float(value), rel=1e-12, abs=1e-12), key
    assert metrics["n_scored"] == len(used) and metrics["strategy"] == STRATEGY


def test_the_scatter_shows_substitutions_and_indels_apart(cbx4):
    wild, table = cbx4
    scored = score_dms(Engine(load_weights("random:tiny")), parse_dms(table.to_csv(index=False), wild), STRATEGY)
    figure = dms_scatter(scored, dms_metrics(scored, model="random:tiny"))
    by_kind = {}
    for trace in figure.data:
        by_kind[trace.name.split(", ")[-1]] = by_kind.get(trace.name.split(", ")[-1], 0) + len(trace.x)
    # Single substitutions counted here by comparing sequences: same length, one residue differs
    # (a "PW" delins over a P is one: the variant is the smallest edit that makes the sequence).
    usable = distinct_usable(table)["mutated_sequence"]
    singles = sum(len(s) == len(wild) and sum(a != b for a, b in zip(s, wild)) == 1 for s in usable)
    assert singles >= 8 and by_kind == {"single": singles, "indel or stop": len(usable) - singles}
    assert all(trace.marker.symbol == "triangle-up" for trace in figure.data if trace.name.endswith("indel or stop"))
