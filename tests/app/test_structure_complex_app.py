"""The Structure page's ESMFold2 complex under AppTest, with the untrained ``random:esmfold2-tiny``:
two records picked as chains A and B -> the estimate -> Predict (a background job) -> the 3D view by
chain and by AlphaFold's pLDDT bands, pTM/ipTM, the PAE heatmap with the chain boundary, the
chain-pair ipTM table, and the mmCIF / PDB / confidences downloads read back (Biopython) against a
fold of the same chains made here directly (``folding.predict_complex_stored``'s fold); the page's
contacts then read the complex's chain of the chosen record; a second session reads the fold from
the store; a hosted server refuses a complex over its length limit before any work."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from test_app import assert_clean, figures, open_page, paste, settle, start, unescaped
from test_structure_predict_app import built, handed  # noqa: F401 (a fixture)
from flamino_core.model.model_id import ModelId

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
# Human ubiquitin's first 50 residues (P0CG48) and amyloid beta 1-42 (P05067 672-713): real sequences.
UBQ50 = "MQIFVKTLTGKTITLEVEPSDTIENVKAKIQDKEGIPPDQQRLIFAGKQL"
ABETA42 = "DAEFRHDSGYEVHHQKLVFFAEDVGSNKGAIIGLMVGGVVIA"
PREDICT = "Predict the complex (ESMFold2)"


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FLAMINO_MODEL", "random:tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def complex_page(chains=("abeta42", "ubq50")) -> AppTest:
    """Two records pasted, the Structure page on ESMFold2 with ``chains`` picked in that order."""
    at = start()
    paste(at, f">ubq50\n{UBQ50}\n>abeta42\n{ABETA42}\n")
    at = open_page(at, "structure")
    at.radio(key="fold_engine").set_value("ESMFold2 (a record or a complex)").run()
    at.multiselect(key="fold2_chains").set_value(list(chains)).run()
    return at


def viewer_scenes(at: AppTest) -> list[dict]:
    return [json.loads(s.proto.json_args)["scene"] for s in at.get("component_instance")
            if "flamino_molecule" in s.proto.component_name]


def direct_fold():
    from flamino_core.structure.folding.complex_plan import fold_complex_exact
    from flamino_core.weights.esmfold2_hub import load_fold2_model

    return fold_complex_exact(load_fold2_model(ModelId.parse("random:esmfold2-tiny"))[0], [ABETA42, UBQ50],
                              ["abeta42", "ubq50"], "abeta42_ubq50")


def test_a_complex_of_two_records_folds_and_shows_chains_plddt_pae_iptm_and_files(handed):  # noqa: F811
    from Bio.PDB import MMCIFParser, PDBParser

    at = complex_page()
    assert_clean(at)
    said = [unescaped(c.value) for c in at.caption]
    assert any("A = abeta42 (42 residues), B = ubq50 (50 residues)" in c for c in said)
    assert any("untrained test model" in unescaped(w.value) for w in at.warning)
    assert any(c.startswith("Memory: about") and "Time:" in c for c in said)
    next(b for b in at.button if b.label == PREDICT).click()
    settle(at.run())
    assert_clean(at)
    reference = direct_fold()
    assert any(h.value == "The predicted complex" for h in at.subheader)
    assert any("random:esmfold2-tiny, an untrained test model" in unescaped(c.value) for c in at.caption)
    shown = {m.label: m.value for m in at.metric}
    assert shown["pTM"] == f"{reference.ptm:.3f}" and shown["ipTM"] == f"{reference.iptm:.3f}"
    # The complex's view by chain: both chains coloured, one colour each; the record's own chain first.
    complex_view = viewer_scenes(at)[0]
    assert complex_view["chains"] == ["A", "B"] and len(complex_view["residues"]) == 92
    colours = {r["key"].split("|")[0]: r["colour"] for r in complex_view["residues"]}
    assert len({r["colour"] for r in complex_view["residues"]}) == 2 and colours["A"] != colours["B"]
    # By pLDDT: AlphaFold's band of each residue's pLDDT (the fold's, through the store: float32 exactly).
    at.radio(key="fold2_colour").set_value("pLDDT").run()
    plddt = 100 * reference.plddt
    bands = np.select([plddt >= 90, plddt >= 70, plddt >= 50], ["#0053d6", "#65cbf3", "#ffdb13"], "#ff7d45")
    by_plddt = viewer_scenes(at)[0]
    assert [r["colour"] for r in by_plddt["residues"]] == bands.tolist()
    assert len(set(bands)) >= 2  # the test model's pLDDT spans bands (48-75 here), so the check bites
    np.testing.assert_allclose([r["value"] for r in by_plddt["residues"]], plddt, atol=1e-3)
    # PAE: the whole complex, one boundary line per axis between residue 42 and 43.
    pae = next(f for f in figures(at) if "Predicted aligned error, chains A/B" in f["layout"]["title"]["text"])
    assert [s["x0"] for s in pae["layout"]["shapes"] if s["x0"] == s["x1"]] == [42.5]
    assert [s["y0"] for s in pae["layout"]["shapes"] if s["y0"] == s["y1"]] == [42.5]
    table = at.dataframe[0].value
    assert list(table["chain"]) == ["A (abeta42)", "B (ubq50)"]
    np.testing.assert_allclose(table.iloc[:, 1:].to_numpy(float), reference.chain_pair_iptm, atol=6e-4)
    # Downloads: chains, residues, coordinates and per-atom pLDDT in the B-factors, read back.
    for key, parser in (("complex_cif", MMCIFParser(QUIET=True)), ("complex_pdb", PDBParser(QUIET=True))):
        name, data = handed[key]
        structure = parser.get_structure("c", io.StringIO(built(data)))
        assert [c.id for c in structure[0]] == ["A", "B"] and name.endswith((".cif", ".pdb"))
        assert [len(c) for c in structure[0]] == [42, 50]
        atoms = list(structure.get_atoms())
        np.testing.assert_allclose([a.coord for a in atoms], reference.positions, atol=1e-3)
        np.testing.assert_allclose([a.bfactor for a in atoms], 100 * reference.plddt_atoms, atol=0.006)
    confidences = json.loads(built(handed["complex_json"][1]))
    assert confidences["chain_ids"] == ["A", "B"] and abs(confidences["iptm"] - reference.iptm) < 1e-4
    # The complex is the page's structure: the chosen record (ubq50, the first pasted) aligned to its own
    # chain, B, for the contacts' precision and the tracks.
    assert any("Contact precision" in h.value for h in at.subheader)
    assert any("chain B: 50 residues, 50 aligned, identity 100.0%" in unescaped(s.value) for s in at.success)


def test_a_second_session_reads_the_complex_from_the_store_and_the_other_record_sees_its_chain():
    from app_pages._ui.server import background

    at = complex_page()
    next(b for b in at.button if b.label == PREDICT).click()
    settle(at.run())
    before = len(background.every_job())
    again = complex_page()
    assert_clean(again)
    assert len(background.every_job()) == before and not any(b.label == PREDICT for b in again.button)
    assert any(h.value == "The predicted complex" for h in again.subheader)
    # The other record of the complex (ubq50, chosen on Input) opens on its own chain, B.
    from app_pages._ui.structure import loaded_structure

    held, key, _ = again.session_state[loaded_structure.STRUCTURE]
    assert again.session_state[loaded_structure.CHAINS] == (key, {"abeta42": "A", "ubq50": "B"})
    # SaProt reads the complex as a prediction (its title): each chain's 3Di letters, pLDDT < 70 masked.
    from flamino_core.structure.three_di import is_predicted_structure, structure_tokens

    assert is_predicted_structure(held)
    for sequence, chain in ((ABETA42, "A"), (UBQ50, "B")):
        tokens = structure_tokens(sequence, held, chain, predicted=True)
        assert len(tokens.letters) == len(sequence) and 0 < tokens.low_confidence <= len(sequence)


def test_a_hosted_server_refuses_a_complex_over_its_limit_before_work(monkeypatch):
    from app_pages._ui.server import background

    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    monkeypatch.setenv("FLAMINO_MAX_FOLD_RESIDUES", "80")
    before = len(background.every_job())
    at = complex_page()
    assert any("92 residues in the complex: this server folds 80 at most" in unescaped(e.value)
               and "pair state" in e.value for e in at.error)
    assert not any(b.label == PREDICT for b in at.button)
    assert len(background.every_job()) == before
    assert any("This server folds 80 residues at most, all chains together" in unescaped(c.value) for c in at.caption)
    at.multiselect(key="fold2_chains").set_value(["abeta42"]).run()  # one chain of 42 fits
    assert any(b.label == PREDICT for b in at.button)


def test_saprot_scores_a_list_on_the_records_own_chain_of_the_predicted_complex(monkeypatch):
    """SaProt (``random:tiny-saprot``) on Variant effects after the complex is predicted: the chosen
    record (ubq50) is scored on the 3Di letters of its own chain, B, of the complex, pLDDT < 70 masked."""
    from test_app_variants import type_list

    from flamino_core.structure.three_di import structure_tokens

    monkeypatch.setenv("FLAMINO_MODEL", "random:tiny-saprot")
    at = complex_page()
    next(b for b in at.button if b.label == PREDICT).click()
    settle(at.run())
    from app_pages._ui.structure import loaded_structure

    held = at.session_state[loaded_structure.STRUCTURE][0]
    tokens = structure_tokens(UBQ50, held, "B", predicted=True)
    at = type_list(open_page(at, "variants"), "M1A, K6R")
    assert_clean(at)
    said = [unescaped(c.value) for c in at.caption if unescaped(c.value).startswith("Structure-aware:")]
    assert said == [f"Structure-aware: abeta42_ubq50_esmfold2.pdb chain B: {tokens.describe().split('chain B: ')[1]}."]
