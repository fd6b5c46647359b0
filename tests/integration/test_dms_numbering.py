"""Issue 23 item 8: a numbering most rows of a real assay miss stops with the numbering they fit
(``flamino dms`` exit 2, the app the same message) unless the user forces it.

On ../shared/dms/A0A1I9GEU1_NEIME_Kennouche_2019.csv (numbered from 1), ``--offset 5`` leaves 62
of 922 rows fitting the given wild type by chance (68 of a wild type derived under that
numbering); before, those got scored and metrics were computed on them."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from test_app import environment, open_page, paste, start, unescaped  # noqa: F401  (its autouse fixture: random:tiny)
from test_app_variants import upload_dms

from flamino_core.numbering import Numbering
from flamino_core.cli import main
from flamino_core.inputs.fasta import read_fasta
from flamino_core.variants.dms import numbering_problem, read_dms
from flamino_core.variants.notation import Variant, parse_variant

ASSAY = Path(__file__).resolve().parents[3] / "shared" / "dms" / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"
WILD_TYPE = ASSAY.with_suffix(".wt.fa")
pytestmark = pytest.mark.skipif(not ASSAY.exists(), reason=f"the ProteinGym assay is not at {ASSAY}")


def fitting_rows(offset: int) -> int:
    """Rows whose mutant fits the given wild type numbered from ``offset`` (counted here, directly)."""
    wild_type = read_fasta(WILD_TYPE).records[0].sequence
    return sum(isinstance(parse_variant(m, wild_type, Numbering(offset)), Variant) for m in pd.read_csv(ASSAY)["mutant"])


@pytest.mark.parametrize("given", [True, False])
def test_a_wrong_offset_stops_with_the_offset_the_rows_fit(tmp_path, capsys, given):
    out, metrics = tmp_path / "scored.csv", tmp_path / "metrics.json"
    sequence = ["--sequence", str(WILD_TYPE)] if given else []
    code = main(["dms", str(ASSAY), *sequence, "--offset", "5", "-m", "random:tiny", "-o", str(out), "--metrics", str(metrics)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists() and not metrics.exists()
    assert "rows do not fit the wild type" in err and "set the offset to 1" in err and "--force-offset" in err
    assert main(["dms", str(ASSAY), *sequence, "--offset", "1", "-m", "random:tiny", "-o", str(out),
                 "--metrics", str(metrics), "--strategy", "wt-marginals"]) == 0  # fmt: skip


def test_forced_it_scores_the_rows_that_fit(tmp_path, capsys):
    out, metrics = tmp_path / "scored.csv", tmp_path / "metrics.json"
    code = main(["dms", str(ASSAY), "--sequence", str(WILD_TYPE), "--offset", "5", "--force-offset", "-m", "random:tiny",
                 "-o", str(out), "--metrics", str(metrics), "--strategy", "wt-marginals"])  # fmt: skip
    assert code == 0 and "as --force-offset asks" in capsys.readouterr().err
    assert json.loads(metrics.read_text())["n_scored"] == fitting_rows(5) == 62


def test_the_right_numbering_is_no_problem():
    assert numbering_problem(read_dms(ASSAY)) is None


def test_the_app_says_the_same_and_scores_only_when_told():
    wild_type = read_fasta(WILD_TYPE).records[0].sequence
    at = paste(start(), f">PILIN/5-165\n{wild_type}\n")  # the id numbers the record from 5
    at = open_page(at, "variants")
    at.radio(key="_w_vinput").set_value("dms").run()
    at = upload_dms(at, ASSAY.name, ASSAY.read_bytes())
    at.radio(key="_w_dmswt").set_value("record").run()
    assert not at.exception
    expected = numbering_problem(read_dms(ASSAY, wild_type, Numbering(5)))
    assert "set the offset to 1" in expected
    assert any(unescaped(e.value) == f"{ASSAY.name}: {expected}" for e in at.error)  # as the reader sees it
    assert not at.metric  # nothing scored
    at.checkbox(key="dms_force_offset").check().run()
    assert not at.exception and len(at.error) == 1  # the message stays above the forced results
    assert {m.label: m.value for m in at.metric}["Rows used"] == str(fitting_rows(5))
