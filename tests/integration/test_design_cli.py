"""``flamino campaign``: three design rounds on the real ProteinGym assay in ../shared/dms/, from
the command line (``flamino_core.cli.main``), each round "measured" by looking its proposals up
in the assay; every round's proposals computed again from the folder are the same; the history
is what the measurements say. One-hot features: no model runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flamino_core.numbering import Numbering
from flamino_core.cli import main
from flamino_core.design.proposals import COLUMNS

DMS = Path(__file__).resolve().parents[3] / "shared" / "dms" / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"
WILD_TYPE = DMS.with_suffix(".wt.fa")


def measure(plate: Path, assay: pd.DataFrame, out: Path) -> pd.DataFrame:
    """The plate's variants with their DMS scores from the assay (the oracle)."""
    proposed = pd.read_csv(plate)
    measured = assay.set_index("mutant").loc[proposed["mutant"], ["DMS_score"]].reset_index()
    measured.to_csv(out, index=False)
    return measured


@pytest.fixture(scope="module")
def three_rounds(tmp_path_factory):
    """A campaign: 24 variants measured to start with, then three rounds of 12 proposals, each
    measured; returns (folder, assay, every table measured, the outputs of each command)."""
    root = tmp_path_factory.mktemp("campaign")
    folder = root / "c"
    assay = pd.read_csv(DMS)
    assert main(["campaign", "init", str(folder), "--wild-type", str(WILD_TYPE), "--target", "DMS_score",
                 "--candidates", str(DMS), "--seed", "7", "--batch", "12"]) == 0
    start = assay.iloc[::38][["mutant", "DMS_score"]]  # 25 rows spread over the protein
    start.to_csv(root / "start.csv", index=False)
    assert main(["campaign", "add-round", str(folder), str(root / "start.csv")]) == 0
    tables = [start]
    for number in (2, 3, 4):
        plate = root / f"plate{number}.csv"
        assert main(["campaign", "propose", str(folder), "-o", str(plate)]) == 0
        tables.append(measure(plate, assay, root / f"measured{number}.csv"))
        assert main(["campaign", "add-round", str(folder), str(root / f"measured{number}.csv")]) == 0
    return folder, assay, tables


def test_three_rounds_of_proposals_from_the_command_line(three_rounds):
    folder, assay, tables = three_rounds
    data = json.loads((folder / "campaign.json").read_text())
    assert [r["round"] for r in data["rounds"]] == [1, 2, 3, 4]
    assert [r["n_measured"] for r in data["rounds"]] == [25, 12, 12, 12]
    seen = set(tables[0]["mutant"])
    for number, table in zip((2, 3, 4), tables[1:]):
        proposals = pd.read_csv(folder / f"round-{number}" / "proposals.csv")
        assert list(proposals.columns) == list(COLUMNS)
        assert len(proposals) == 12 and not set(proposals["mutant"]) & seen  # nothing measured twice
        assert proposals["mutant"].str[1:-1].is_unique  # one proposal per position
        assert set(proposals["mutant"]) <= set(assay["mutant"])  # the campaign's candidates only
        assert (proposals["acquisition"] == "ucb").all()
        assert (proposals["low"] < proposals["prediction"]).all()
        assert (proposals["prediction"] < proposals["high"]).all()
        record = data["rounds"][number - 1]["proposal"]
        assert record["n_measured"] == len(seen) and record["seed"] == 7
        assert record["calibration"]["coverage"] is not None
        seen |= set(table["mutant"])


def test_every_round_is_reproduced_from_the_folder(three_rounds, capsys):
    folder, *_ = three_rounds
    for number in (2, 3, 4):
        assert main(["campaign", "propose", str(folder), "--round", str(number)]) == 0
        assert f"round {number}: reproduced" in capsys.readouterr().out


def test_a_changed_plate_is_not_reproduced(three_rounds, tmp_path, capsys):
    import shutil

    folder, *_ = three_rounds
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    path = copy / "round-3" / "proposals.csv"
    plate = pd.read_csv(path)
    plate.loc[0, "mutant"], plate.loc[1, "mutant"] = plate.loc[1, "mutant"], plate.loc[0, "mutant"]
    plate.to_csv(path, index=False)
    assert main(["campaign", "propose", str(copy), "--round", "3"]) == 1
    assert "differ from the stored ones (2 of 12 rows)" in capsys.readouterr().err


def test_the_status_is_the_history_of_the_measurements(three_rounds, capsys):
    folder, _, tables = three_rounds
    assert main(["campaign", "status", str(folder), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["measured"] for row in rows] == [25, 12, 12, 12]
    assert [row["proposed"] for row in rows] == [0, 12, 12, 12]
    best = pd.concat(tables)["DMS_score"].cummax()
    ends = [len(tables[0]) - 1 + 12 * k for k in range(4)]
    assert [row["best_so_far"] for row in rows] == pytest.approx(list(best.iloc[ends]))
    assert main(["campaign", "status", str(folder)]) == 0
    assert "next round 5" in capsys.readouterr().out


def test_unusable_inputs_are_refused_in_one_line(three_rounds, tmp_path, capsys):
    folder, *_ = three_rounds
    bad = tmp_path / "bad.csv"
    bad.write_text("mutant,fitness\nF1I,1.0\n")
    assert main(["campaign", "add-round", str(folder), str(bad)]) == 2
    assert "no column 'DMS_score'" in capsys.readouterr().err
    assert main(["campaign", "propose", str(tmp_path / "none")]) == 2
    assert "no campaign here" in capsys.readouterr().err
    assert main(["campaign", "init", str(folder), "--wild-type", str(WILD_TYPE), "--target", "x"]) == 2
    assert "already holds a campaign" in capsys.readouterr().err
    assert main(["campaign", "propose", str(folder), "--features", "embedding", "--force", "--round", "2"]) == 2
    assert "need a model" in capsys.readouterr().err


def test_a_model_ranks_round_one_and_is_the_prior_after(tmp_path, capsys):
    """With -m (random:tiny here: the arithmetic, not biology): round 1 has no measurement, so the
    zero-shot score ranks the plate; round 2 fits the augmented features (the score as the prior)."""
    from flamino_core.engine.engine import Engine
    from flamino_core.variants.notation import parse_variant
    from flamino_core.variants.scoring import score_variants
    from flamino_core.weights.loading import load_weights

    folder = tmp_path / "m"
    assay = pd.read_csv(DMS).head(120)  # positions 1-7: a small pool, a few masked passes
    assay[["mutant"]].to_csv(tmp_path / "library.csv", index=False)
    assert main(["campaign", "init", str(folder), "--wild-type", str(WILD_TYPE), "--target", "DMS_score",
                 "--candidates", str(tmp_path / "library.csv"), "--batch", "4", "--features", "augmented",
                 "-m", "random:tiny"]) == 0
    assert main(["campaign", "propose", str(folder)]) == 0
    assert "random weights" in capsys.readouterr().err
    first = pd.read_csv(folder / "round-1" / "proposals.csv")
    assert (first["acquisition"] == "zero-shot").all() and first["prediction"].isna().all()
    # the scores are flamino variants' masked-marginals, and the plate takes the best per position
    wild_type = "".join(WILD_TYPE.read_text().splitlines()[1:])
    variants = [parse_variant(m, wild_type, Numbering(1), n) for n, m in enumerate(assay["mutant"])]
    scores = score_variants(Engine(load_weights("random:tiny")), wild_type, variants, "masked-marginals").table
    by_mutant = dict(zip(assay["mutant"], scores["score"]))
    np.testing.assert_allclose(first["zero_shot"], [by_mutant[m] for m in first["mutant"]], rtol=1e-6)
    best = pd.Series(by_mutant).groupby(lambda m: m[1:-1]).max().sort_values(ascending=False)
    assert list(first["zero_shot"]) == pytest.approx(list(best.iloc[:4]), rel=1e-6)
    measure(folder / "round-1" / "proposals.csv", assay, tmp_path / "r1.csv")
    start = assay.iloc[::10][["mutant", "DMS_score"]]  # and 12 more, so a process is fitted
    pd.concat([pd.read_csv(tmp_path / "r1.csv"), start]).to_csv(tmp_path / "r1.csv", index=False)
    assert main(["campaign", "add-round", str(folder), str(tmp_path / "r1.csv")]) == 0
    assert main(["campaign", "propose", str(folder)]) == 0
    second = pd.read_csv(folder / "round-2" / "proposals.csv")
    record = json.loads((folder / "campaign.json").read_text())["rounds"][1]["proposal"]
    assert (second["acquisition"] == "ucb").all() and second["prediction"].notna().all()
    assert record["random_weights"] is True and record["settings"]["features"] == "augmented"
