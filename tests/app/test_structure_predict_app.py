"""The Structure page's "Predict the structure (ESMFold)" under AppTest, with the untrained
``random:esmfold-tiny`` model on a real sequence (amyloid beta 1-42, ../shared/structures/2BEG.pdb's):
the estimate before the job, the job, the 3D view by pLDDT, the PAE heatmap, the PDB and mmCIF
downloads read back by Biopython against a fold made here directly (``fold_sequence``), the fold
read back from the result store by a second session, the predicted structure used by the page's
contacts like an upload, and a hosted server's length limit."""

from __future__ import annotations

import io

import numpy as np
import pytest
from structure_reference import STRUCTURES
from test_app import assert_clean, figures, open_page, paste, settle, start, unescaped, values
from test_contact_eval import reference_case
from test_structure_app import scene
from flamino_core.model.model_id import ModelId

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
pytestmark = pytest.mark.skipif(not STRUCTURES.is_dir(), reason=f"real structures not found at {STRUCTURES}")
ABETA42, _, _ = reference_case("2BEG.pdb")
PREDICT = "Predict the structure (ESMFold)"


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FLAMINO_MODEL", "random:tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def handed(monkeypatch):
    """Every download the page hands Streamlit: key -> (file name, bytes as a click builds them)."""
    from app_pages._ui.frame import downloads

    caught, real = {}, downloads._button

    def catch(label, data, file_name, mime, key, help=None):
        caught[key] = (file_name, data)
        return real(label, data, file_name, mime, key, help)

    monkeypatch.setattr(downloads, "_button", catch)
    return caught


def built(data) -> str:
    made = data() if callable(data) else data
    return made.decode() if isinstance(made, bytes) else made


def structure_page() -> AppTest:
    at = start()
    paste(at, f">abeta42\n{ABETA42}\n")
    return open_page(at, "structure")


def direct_fold():
    from flamino_core.engine.fold import fold_sequence
    from flamino_core.weights.esmfold import load_fold_model

    return fold_sequence(load_fold_model(ModelId.parse("random:esmfold-tiny"))[0], ABETA42)


def test_predict_shows_the_fold_by_plddt_its_pae_and_downloads_biopython_reads_back(handed):
    from Bio.PDB import MMCIFParser, PDBParser

    at = structure_page()
    assert_clean(at)
    assert any("untrained test model" in unescaped(w.value) for w in at.warning)
    assert any("Memory: about" in unescaped(c.value) and "MiB" in c.value for c in at.caption)
    assert not figures(at) and scene(at) is None
    next(b for b in at.button if b.label == PREDICT).click()
    settle(at.run())
    assert_clean(at)
    reference = direct_fold()
    plddt = 100 * reference.residue_plddt
    # The pLDDT view: the scene's per-residue values are the fold's CA pLDDT (the page's stored
    # arrays went through SQLite and back: float32 exactly; PDB text rounds to 0.01, not used here).
    shown = [s for s in at.get("component_instance") if "flamino_molecule" in s.proto.component_name]
    assert len(shown) >= 2  # the prediction's pLDDT view and the page's track view
    import json

    first_scene = json.loads(shown[0].proto.json_args)["scene"]
    np.testing.assert_allclose([r["value"] for r in first_scene["residues"]], plddt, atol=1e-3)
    # #66 D2: pLDDT in AlphaFold's fixed bands (the untrained fold is 49-57: orange and yellow only).
    from flamino_core.structure.confidence import plddt_colours

    assert [r["colour"] for r in first_scene["residues"]] == plddt_colours(plddt)
    assert [b["colour"] for b in first_scene["legend"]["bands"]] == ["#ff7d45", "#ffdb13", "#65cbf3", "#0053d6"]
    track = next(f for f in figures(at) if "pLDDT per residue" in f["layout"]["title"]["text"])
    assert track["layout"]["yaxis"]["range"] == [0, 100]
    pae = next(f for f in figures(at) if "Predicted aligned error" in f["layout"]["title"]["text"])
    z = np.array([values(row) for row in pae["data"][0]["z"]]) if isinstance(pae["data"][0]["z"], list) \
        else np.array(values(pae["data"][0]["z"])).reshape(len(ABETA42), -1)
    np.testing.assert_allclose(z, reference.pae, atol=1e-4)  # the same model, the same XLA program
    # Downloads: the PDB's coordinates and B-factors (pLDDT x 100) as Biopython reads them.
    pdb_name, pdb_data = handed["prediction_pdb"]
    cif_name, cif_data = handed["prediction_cif"]
    # #66 D3: named by the record and the fold model that made them, not the sidebar's random:tiny
    assert (pdb_name, cif_name) == ("abeta42_esmfold-tiny.pdb", "abeta42_esmfold-tiny.cif")
    exists = reference.atom37_exists > 0.5
    for parser, text in ((PDBParser(QUIET=True), built(pdb_data)), (MMCIFParser(QUIET=True), built(cif_data))):
        atoms = list(parser.get_structure("p", io.StringIO(text)).get_atoms())
        # PDB columns: coordinates to 0.001 A (rounding 5e-4, plus the fold's own ~1e-5 noise), B to 0.01
        np.testing.assert_allclose([a.coord for a in atoms], reference.atom37[exists], atol=1e-3)
        np.testing.assert_allclose([a.bfactor for a in atoms], 100 * reference.plddt[exists], atol=0.006)
    # The predicted structure is the page's structure: its contacts' precision table is there.
    assert any("Contact precision" in h.value for h in at.subheader)
    assert any("predicted by random:esmfold-tiny" in unescaped(c.value) for c in at.caption)
    # SaProt reads the held structure as a prediction: its residues with pLDDT < 70 become '#'.
    from flamino_core.structure.three_di import is_predicted_structure, structure_tokens

    held = at.session_state["_structure"][0]
    assert is_predicted_structure(held)
    tokens = structure_tokens(ABETA42, held, predicted=is_predicted_structure(held))
    # SaProt's residue pLDDT: the mean of its atoms' B-factors (pLDDT x 100 to the PDB's 0.01)
    atom_b = np.round(100 * reference.plddt, 2) * reference.atom37_exists
    low = atom_b.sum(axis=1) / reference.atom37_exists.sum(axis=1) < 70
    assert tokens.low_confidence == int(low.sum()) > 0
    assert all((letter == "#") == masked for letter, masked in zip(tokens.letters, low))


def test_a_second_session_reads_the_fold_from_the_store_without_a_job():
    from app_pages._ui.server import background

    at = structure_page()
    next(b for b in at.button if b.label == PREDICT).click()
    settle(at.run())
    before = len(background.every_job())
    again = structure_page()  # a new session: the stored fold is held at once
    assert_clean(again)
    assert len(background.every_job()) == before
    assert not any(b.label == PREDICT for b in again.button)
    assert any("Predicted aligned error" in f["layout"]["title"]["text"] for f in figures(again))
    # #66 D10: the share note says what happened here: the stored fold appeared on its own
    assert any("sees it again at once" in unescaped(c.value) for c in again.caption)
    assert not any("presses Predict" in unescaped(c.value) for c in again.caption)


def test_a_hosted_server_refuses_a_fold_over_its_limit_before_work(monkeypatch):
    from app_pages._ui.server import background

    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    monkeypatch.setenv("FLAMINO_MAX_FOLD_RESIDUES", "40")
    before = len(background.every_job())
    at = structure_page()
    assert any("this server folds 40 at most" in unescaped(e.value) and "pair state" in e.value for e in at.error)
    assert not any(b.label == PREDICT for b in at.button)
    assert len(background.every_job()) == before


def test_a_hosted_server_refuses_a_fold_over_its_time_budget_before_work(monkeypatch):
    """Issue #67: a fold estimated past ``FLAMINO_MAX_FOLD_SECONDS`` is refused in words, with no
    Predict button and no job (as a fit over its budget is)."""
    from app_pages._ui.server import background

    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    monkeypatch.setenv("FLAMINO_MAX_FOLD_SECONDS", "1")  # any fold not compiled yet is estimated at 10 s or more
    before = len(background.every_job())
    at = structure_page()
    assert any("over the 1 s this server gives one fold" in unescaped(e.value) for e in at.error)
    assert not any(b.label == PREDICT for b in at.button)
    assert len(background.every_job()) == before


def test_a_hosted_fold_runs_in_the_fold_worker_not_the_server(monkeypatch):
    """Issue #67 row 2: hosted, Predict folds in the server's fold worker (another process) and the
    page holds its result as it holds one made here. 42 residues: the express worker's, the
    long folds' worker not started (the first row: a short fold never waits for a long one)."""
    from flamino_core.structure.folding import fold_worker

    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    monkeypatch.setattr(fold_worker, "_RUNNER", None)
    monkeypatch.setattr(fold_worker, "_EXPRESS", None)
    at = structure_page()
    next(b for b in at.button if b.label == PREDICT).click()
    settle(at.run())
    assert_clean(at)
    runner = fold_worker.express_runner()
    try:
        assert runner.pid is not None and runner.compiled(fold_worker.FoldRequest(
            ModelId.parse("random:esmfold-tiny"), "fp32", ABETA42).shape_key)
        assert fold_worker.fold_runner().pid is None
        assert any("Predicted aligned error" in f["layout"]["title"]["text"] for f in figures(at))
    finally:
        runner.close()


def test_another_record_is_offered_its_own_prediction_not_shown_the_first_ones():
    """A prediction is of one sequence: choosing another record (here: a new paste) offers that
    record a fold instead of aligning it to the first one's structure."""
    at = structure_page()
    next(b for b in at.button if b.label == PREDICT).click()
    settle(at.run())
    open_page(at, "input")
    paste(at, ">abeta40\n" + ABETA42[:40] + "\n")
    open_page(at, "structure")
    assert_clean(at)
    assert any(b.label == PREDICT for b in at.button)
    assert not any("Predicted aligned error" in f["layout"]["title"]["text"] for f in figures(at))


def test_saprot_scores_a_list_on_the_predicted_structure_masked_below_70(monkeypatch):
    """The issue's flow: a sequence with no structure -> Predict -> SaProt (``random:tiny-saprot``)
    scores a mutation list on the prediction's 3Di letters, residues with pLDDT < 70 read as '#'
    (here all of them: see below); the page says how many were masked, and its scores equal the
    core's on letters read here from a fold made directly."""
    from test_app_variants import type_list

    from flamino_core import Engine, load_weights
    from flamino_core.model.esmfold.pdb import to_pdb
    from flamino_core.structure import three_di
    from flamino_core.structure.files.reading import parse_structure_bytes
    from flamino_core.variants.notation import parse_mutations
    from flamino_core.variants.scoring import score_variants

    monkeypatch.setenv("FLAMINO_MODEL", "random:tiny-saprot")
    at = structure_page()
    next(b for b in at.button if b.label == PREDICT).click()
    settle(at.run())
    mutations = "D1A, F4W, G38V"
    at = type_list(open_page(at, "variants"), mutations)
    assert_clean(at)
    reference = direct_fold()
    pdb = parse_structure_bytes(("TITLE     ESMFOLD PREDICTION\n" + to_pdb(reference)).encode(), "direct.pdb")
    tokens = three_di.structure_tokens(ABETA42, pdb, predicted=True)
    # The untrained model is unsure everywhere (pLDDT 50-53 on every residue; seeds 0-7 alike), so
    # every residue is masked: the letters it would give unmasked are not all '#'.
    assert tokens.low_confidence == len(ABETA42) and set(tokens.letters) == {"#"}
    assert set(three_di.structure_tokens(ABETA42, pdb, predicted=False).letters) != {"#"}
    said = [unescaped(c.value) for c in at.caption if unescaped(c.value).startswith("Structure-aware:")]
    assert said == [f"Structure-aware: abeta42_esmfold.pdb chain A: 0 of {len(ABETA42)} residues "
                    f"structure-aware; {len(ABETA42)} masked for pLDDT < 70."]
    # #66 D6: every residue masked is said as what it means: the scores are sequence-only
    assert any("Every residue of abeta42_esmfold.pdb is masked (pLDDT < 70), so these scores are sequence-only"
               in unescaped(w.value) for w in at.warning)
    engine = Engine(load_weights("random:tiny-saprot"))
    variants, _ = parse_mutations(mutations, ABETA42)
    core = score_variants(engine, ABETA42, variants, "masked-marginals", structure=tokens.letters).table
    np.testing.assert_allclose(at.dataframe[0].value["score"].to_numpy(float), core["score"].to_numpy(float), atol=1e-6)


def test_a_variants_structure_is_folded_beside_the_wild_type_superposed_with_its_table(handed):
    """#66 item 3 on Variant effects: the list's first variant offered, the caveat and its source in
    place, the wild type and the variant folded as jobs (the same model and settings), the 3D view
    of the variant coloured by its C-alpha displacement over the wild type, the tracks, and the
    downloads: the table equals the core's comparison of folds made here directly."""
    import json

    import pandas as pd
    from test_app_variants import type_list

    from flamino_core.engine.fold import fold_sequence
    from flamino_core.numbering import Numbering
    from flamino_core.structure.folding import variant_structures as vs
    from flamino_core.weights.esmfold import load_fold_model

    at = start()
    paste(at, f">abeta42\n{ABETA42}\n")
    at = type_list(open_page(at, "variants"), "F19P")
    assert_clean(at)
    assert any("Feldman, Brogi and Skolnick 2026" in unescaped(w.value) for w in at.warning)
    assert at.text_input(key="_w_vfold").value == "F19P"
    next(b for b in at.button if b.label == "Fold the wild type and 1 variant").click()
    settle(at.run())
    assert_clean(at)
    model = load_fold_model(ModelId.parse("random:esmfold-tiny"))[0]
    (variant,) = vs.substitution_variants("F19P", ABETA42)
    expected = vs.compare(fold_sequence(model, ABETA42), fold_sequence(model, variant.apply(ABETA42)), variant,
                          Numbering(1))
    name, data = handed["variant_fold_csv"]
    assert name == "abeta42_esmfold-tiny_variants.csv"
    table = pd.read_csv(io.StringIO(built(data)))
    # The same XLA program on the same CPU, the stored float32 arrays: displacements to 1e-3 A
    np.testing.assert_allclose(table["ca_displacement"], expected.table["ca_displacement"], atol=1e-3)
    assert table["contacts_gained"].tolist() == expected.table["contacts_gained"].tolist()
    shown = [s for s in at.get("component_instance") if "flamino_molecule" in s.proto.component_name]
    view = json.loads(shown[-1].proto.json_args)["scene"]
    assert view["chain"] == "A" and view["chosen"]["key"] == "A|19|"
    np.testing.assert_allclose([r["value"] for r in view["residues"]], expected.table["ca_displacement"], atol=1e-3)
    assert any("against the wild type" in f["layout"]["title"]["text"] for f in figures(at))
    assert handed["variant_fold_mt_pdb"][0] == "abeta42_esmfold-tiny_F19P.pdb"


def test_the_page_says_this_devices_length_limit_as_the_command_lines_plan_does(monkeypatch, tmp_path, capsys):
    """The limit before any work (#64 item 5): the page's words and number are the plan's of
    `flamino fold` (one core rule, ``folding.run_length_limit``), for a host whose available
    memory is fixed here (64 GiB: a limit past the stem's trained length); a record over the
    trained length is flagged before Predict."""
    from flamino_core.cli import main as cli_main
    from flamino_core.engine import device_memory, memory
    from flamino_core.model.esmfold.config import FoldConfig
    from flamino_core.structure.folding.prediction import device_fold_limit

    monkeypatch.setattr(memory, "available_memory", lambda: 64 << 30)
    monkeypatch.setattr(device_memory, "device_memory", lambda: None)
    at = structure_page()
    said = [unescaped(c.value) for c in at.caption if "Length limit on this device" in c.value]
    longest = device_fold_limit(FoldConfig.tiny(), 64 << 30)  # the estimate's scan, 64 residues a step
    assert longest > 1022
    words = f"{longest:,} residues on this device (the memory estimate in the host's 64.0 GiB available"
    assert len(said) == 1 and words in said[0]
    assert not any("past the ESM-2 stem's trained length" in unescaped(w.value) for w in at.warning)
    fasta = tmp_path / "long.fa"
    fasta.write_text(f">over\n{'ACDEFGHIKLMNPQRSTVWY' * (longest // 20 + 1)}\n")
    capsys.readouterr()
    assert cli_main(["fold", str(fasta), "-m", "random:esmfold-tiny", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"length limit: {words}" in err and "over: " in err  # refused before any fold
    long_page = start()
    paste(long_page, f">long\n{'ACDEFGHIKLMNPQRSTVWY' * 55}\n")  # 1,100 residues
    long_page = open_page(long_page, "structure")
    assert any("1,100 residues: past the ESM-2 stem's trained length" in unescaped(w.value) for w in long_page.warning)
    assert any(b.label == PREDICT for b in long_page.button)
