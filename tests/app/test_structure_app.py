"""The Structure page under ``streamlit.testing.v1.AppTest``, on the untrained ``random:tiny`` model
and the real files in ../shared/structures: upload, chain and model choice, the precision table
(against the independent computation of test_contact_eval), the contact map, the 3D view and its
track choices, downloads, links, hosted mode and the error paths."""

from __future__ import annotations

import http.server
import io
import json
import socket
import threading

import numpy as np
import pytest
from structure_reference import STRUCTURES, read_reference
from test_app import assert_clean, figures, open_page, paste, start, titles, unescaped, values
from test_cli_contacts import _OnePdbEntry, check_rows, entropy_bits
from test_contact_eval import reference_case

from flamino_core.engine.engine import Engine
from flamino_core.structure.files import fetch
from flamino_core.weights.loading import load_weights

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
pytestmark = pytest.mark.skipif(not STRUCTURES.is_dir(), reason=f"real structures not found at {STRUCTURES}")
ABETA42, _, ABETA_XYZ = reference_case("2BEG.pdb")
UPLOAD = "_structure_upload"


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FLAMINO_MODEL", "random:tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def structure_page(sequence: str = ABETA42, query: dict | None = None, header: str = "abeta42") -> AppTest:
    at = start(query) if query else start()
    paste(at, f">{header}\n{sequence}\n")
    return open_page(at, "structure")


def upload(at: AppTest, name: str, data: bytes | None = None) -> AppTest:
    data = (STRUCTURES / name).read_bytes() if data is None else data
    at.file_uploader(key=UPLOAD).set_value((name, data, "application/octet-stream"))
    return at.run()


def scene(at: AppTest) -> dict | None:
    """What the page handed the molecular viewer (``scene.MolecularScene.as_args``), or None."""
    found = [e for e in at.get("component_instance") if "flamino_molecule" in e.proto.component_name]
    return json.loads(found[0].proto.json_args)["scene"] if found else None


def viewer_title(at: AppTest) -> str:
    """The 3D view's title, the bold line above the viewer."""
    bold = [unescaped(m.value)[2:-2] for m in at.markdown if m.value.startswith("**Chain ")]
    return bold[0] if bold else ""


def viewer_values(at: AppTest) -> list[float | None]:
    return [r["value"] for r in scene(at)["residues"]]


def model_bfactors(model_text: str, chain: str) -> dict[int, set[float]]:
    """Residue number -> the B-factors of its atoms in the model text the viewer was handed."""
    from Bio.PDB import PDBParser

    structure = PDBParser(QUIET=True).get_structure("viewer", io.StringIO(model_text))
    return {r.id[1]: {a.get_bfactor() for a in r} for r in structure[0][chain]}


def engine_outputs(model: str, sequence: str):
    """The engine run with the options the page's cached results use (so the same numbers)."""
    engine = Engine(load_weights(model))
    (contacts,) = engine.run([sequence], repr_layers=(), logits=False, contacts=True)
    (logits,) = engine.run([sequence], repr_layers=(), logits=True)
    return contacts.contacts, logits.logits


def test_upload_shows_what_was_read_the_precision_table_the_map_and_the_3d_view():
    at = structure_page()
    assert_clean(at)
    assert any("Upload a PDB or mmCIF file" in i.value for i in at.info) and not figures(at)
    upload(at, "2BEG.pdb")
    assert_clean(at)
    held = unescaped(" ".join(m.value for m in at.markdown))
    assert all(f"chain {c}: 26 amino acids" in held for c in "ABCDE")
    (aligned,) = at.success
    assert unescaped(aligned.value) == "chain A: 26 residues, 26 aligned, identity 100.0%, coverage 61.9% of the sequence"

    contacts, logits = engine_outputs("random:tiny", ABETA42)
    table = at.dataframe[0].value
    assert list(table.columns) == ["model", "record_id", "chain", "range", "cutoff", "precision", "n_pairs",
                                   "identity", "coverage"]
    assert set(table["model"]) == {"random:tiny"}
    rows = [{k: ("" if k == "precision" and np.isnan(v) else str(v)) for k, v in row.items()}
            for row in table.drop(columns="model").to_dict("records")]
    check_rows(rows, contacts, ABETA_XYZ, "abeta42", "A", identity=1.0, coverage=26 / 42)

    (contact_map,) = figures(at)  # the 3D view is the molecular viewer, not a plotly chart
    marks = [t for t in contact_map["data"] if t["type"] == "scatter"]
    all_l = table[(table["range"] == "all") & (table["cutoff"] == "L")].iloc[0]
    assert sum(len(values(t["x"])) for t in marks) == all_l["n_pairs"] == 42
    assert "top L all-range pairs marked" in titles(at)[0]

    view = scene(at)
    assert view["chain"] == "A" and view["format"] == "pdb" and viewer_title(at) == "Chain A of 2BEG.pdb: entropy (bits)"
    residues = read_reference(STRUCTURES / "2BEG.pdb", "A")
    assert [r["key"] for r in view["residues"]] == [f"A|{r.label}|" for r in residues]
    # Residue k of the chain is Aβ position 17 + k; float32 logits, so 1e-5 bits.
    assert [r["position"] for r in view["residues"]] == list(range(17, 43))
    np.testing.assert_allclose(viewer_values(at), entropy_bits(logits)[16:], atol=1e-5)
    # The model the viewer draws carries the same values in its B-factor column (two decimals).
    bfactors = model_bfactors(view["model"], "A")
    assert all(len(bfactors[17 + k]) == 1 for k in range(26))
    np.testing.assert_allclose([bfactors[17 + k].pop() for k in range(26)], entropy_bits(logits)[16:], atol=0.0051)
    assert set(model_bfactors(view["model"], "B")) == set(range(17, 43))  # the whole model travels
    assert view["residues"][0]["text"].startswith("A 17 LEU · position 17 (L) · entropy (bits) = ")
    # The best L/5 of the pairs marked on the map drawn in 3D, between the chain's contact atoms.
    assert len(view["contacts"]) == 42 // 5 and {c["contact"] for c in view["contacts"]} <= {True, False}
    downloads = {b.proto.label for b in at.get("download_button")}
    assert {"Precision (CSV)", "Structure with entropy as B-factors (PDB)", "Figure (HTML)"} <= downloads

    at.selectbox(key="_w_schain").set_value("C").run()
    assert_clean(at)
    assert unescaped(at.success[0].value).startswith("chain C: 26 residues")
    assert set(at.dataframe[0].value["chain"]) == {"C"}


def test_the_table_compares_every_model_run_this_session():
    at = upload(structure_page(), "2BEG.pdb")
    at.session_state["model"] = "random:tiny:3"  # as the sidebar's picker sets it
    at.run()
    assert_clean(at)
    table = at.dataframe[0].value
    assert list(table["model"]) == ["random:tiny"] * 12 + ["random:tiny:3"] * 12
    for model in ("random:tiny", "random:tiny:3"):
        contacts, _ = engine_outputs(model, ABETA42)
        part = table[table["model"] == model].drop(columns="model").to_dict("records")
        rows = [{k: ("" if k == "precision" and np.isnan(v) else str(v)) for k, v in r.items()} for r in part]
        check_rows(rows, contacts, ABETA_XYZ, "abeta42", "A", identity=1.0, coverage=26 / 42)


def test_tracks_and_their_choices_follow_the_widgets_and_a_link():
    query = {"seq": ABETA42, "page": "structure", "schain": "B", "strack": "attention", "sres": "20",
             "slayer": "1", "shead": "2"}
    at = upload(start(query), "2BEG.pdb")  # the link opens the Structure page
    assert_clean(at)
    assert unescaped(at.success[0].value).startswith("chain B:")
    assert viewer_title(at) == "Chain B of 2BEG.pdb: attention from residue 20 (layer 1, head 2)"
    engine = Engine(load_weights("random:tiny"))
    (out,) = engine.run([ABETA42], repr_layers=(), logits=False, attention_layers=(1,))
    np.testing.assert_allclose(viewer_values(at), out.attentions[0][1][20, 1:-1][16:], atol=1e-6)
    assert scene(at)["chosen"]["key"] == "B|20|" and scene(at)["bfactor_scale"] == 100  # attention x100
    assert "Structure with attention as B-factors (PDB)" in {b.proto.label for b in at.get("download_button")}

    for track, title in [("mean-score", "mean substitution score, wt-marginals"),
                         ("substitution", "score of A at each position, wt-marginals"),
                         ("contact-count", "predicted contacts"), ("pca", "PC1 of layer 1")]:  # the link's layer
        at.selectbox(key="_w_strack").set_value(track).run()
        assert_clean(at)
        assert viewer_title(at).endswith(title), track
        legend = scene(at)["legend"]  # scores and components around 0: red-blue centred on 0
        assert legend["signed"] == (track != "contact-count"), track
        if legend["signed"]:
            assert legend["low"] == -legend["high"] and legend["stops"][5] == "#f7f7f7", track  # RdBu's white middle
    at.selectbox(key="_w_slayer").set_value(0).run()
    at.number_input(key="_w_spc").set_value(2).run()
    assert viewer_title(at).endswith("PC2 of layer 0")


def test_attention_comes_from_a_residue_in_the_records_own_numbering():
    """Aβ42 named by its place in APP770 (residues 672-713): the page asks for residue 691, the
    record's number for position 20, and shows attention from position 20, as the link keeps."""
    at = upload(structure_page(query=None, header="abeta/672-713"), "2BEG.pdb")
    at.selectbox(key="_w_strack").set_value("attention").run()
    at.selectbox(key="_w_slayer").set_value(1).run()
    at.selectbox(key="_w_shead").set_value(2).run()
    assert_clean(at)
    widget = at.number_input(key="_w_sres")
    assert widget.label == "From residue (672–713)" and widget.value == 672  # position 1
    widget.set_value(691).run()
    assert_clean(at)
    assert viewer_title(at) == "Chain A of 2BEG.pdb: attention from residue 691 (layer 1, head 2)"
    assert at.session_state["sres"] == 20  # the position, as links carry it
    engine = Engine(load_weights("random:tiny"))
    (out,) = engine.run([ABETA42], repr_layers=(), logits=False, attention_layers=(1,))
    # Token 20 is position 20 (token 0 is <cls>); chain A of 2BEG holds positions 17-42.
    np.testing.assert_allclose(viewer_values(at), out.attentions[0][1][20, 1:-1][16:], atol=1e-6)
    # Hover text and the contact map use the record's numbering too (issue 24: it read 1-42).
    assert scene(at)["residues"][0]["text"].startswith("A 17 LEU · position 688 (L)")
    (contact_map,) = figures(at)
    assert contact_map["layout"]["xaxis"]["range"] == [671.5, 713.5]
    marks = [t for t in contact_map["data"] if t["type"] == "scatter"]
    assert min(min(values(t["x"])) for t in marks if len(values(t["x"]))) >= 672
    heatmap = next(t for t in contact_map["data"] if t["type"] == "heatmap")
    assert values(heatmap["x"])[0] == 672 and values(heatmap["x"])[-1] == 713


def test_several_models_in_the_file():
    """Assembled, since none of the five files has two models: 2BEG's chain A as MODEL 1 and its
    chain B, relabelled A, as MODEL 2 (real coordinates, arrangement made up for the test)."""
    lines = (STRUCTURES / "2BEG.pdb").read_text().splitlines()
    atoms = {c: [line for line in lines if line.startswith("ATOM") and line[21] == c] for c in "AB"}
    text = "\n".join(["MODEL        1", *atoms["A"], "ENDMDL", "MODEL        2",
                      *[line[:21] + "A" + line[22:] for line in atoms["B"]], "ENDMDL", "END"])
    at = upload(structure_page(), "two-models.pdb", text.encode())
    assert_clean(at)
    picker = at.selectbox(key="_w_smodel")
    assert picker.options == ["model 1", "model 2"] and picker.value == 0
    picker.set_value(1).run()
    assert_clean(at)
    from Bio.PDB import PDBParser

    drawn = PDBParser(QUIET=True).get_structure("v", io.StringIO(scene(at)["model"]))[0]["A"]
    chain_b = read_reference(STRUCTURES / "2BEG.pdb", "B")
    np.testing.assert_allclose([r["CA"].coord for r in drawn], [r.atoms["CA"] for r in chain_b], atol=1e-3)


@pytest.mark.parametrize(
    "name, data, message",
    [
        ("HBB_HUMAN.fa", (STRUCTURES.parent / "fasta" / "HBB_HUMAN.fa").read_bytes(),
         "HBB_HUMAN.fa is not a PDB or mmCIF structure: it is a FASTA file"),
        ("broken.cif.gz", b"\x1f\x8b\x08\x00garbage", "broken.cif.gz is a damaged or truncated gzip file"),
        ("1A7G.cif", None, "1A7G.cif chain E does not match the sequence well enough to compare: identity 35.0%"),
    ],
)
def test_files_that_cannot_be_compared_are_messages_not_tracebacks(name, data, message):
    at = upload(structure_page(), name, data)
    assert not at.exception
    assert any(message in unescaped(e.value) for e in at.error), [e.value for e in at.error]
    assert not figures(at) and not at.dataframe and scene(at) is None


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_download_by_pdb_id_and_the_offline_message(monkeypatch):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OnePdbEntry)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        sequence = reference_case("1A7G.cif")[0]
        at = structure_page(sequence)
        monkeypatch.setattr(fetch, "RCSB_URL", f"http://127.0.0.1:{_closed_port()}/download")
        at.text_input(key="_w_structure_fetch_id").input("1A7G").run()
        next(b for b in at.button if b.label == "Download").click().run()
        assert not at.exception
        assert any("could not reach 127.0.0.1" in unescaped(e.value) and "offline" in e.value for e in at.error)
        monkeypatch.setattr(fetch, "RCSB_URL", f"http://127.0.0.1:{httpd.server_address[1]}/download")
        next(b for b in at.button if b.label == "Download").click().run()
        assert_clean(at)
        assert any("PDB entry 1A7G (RCSB)" in unescaped(c.value) for c in at.caption)
        assert unescaped(at.success[0].value).startswith("chain E: 82 residues, 82 aligned, identity 100.0%")
        at.text_input(key="_w_structure_fetch_id").input("not an id").run()
        next(b for b in at.button if b.label == "Download").click().run()
        assert any("neither a PDB id" in unescaped(e.value) for e in at.error)
        assert len(figures(at)) == 1 and scene(at)  # the structure downloaded before is still shown
        # A downloaded structure travels in the link by its id and is downloaded again on opening it.
        assert at.session_state["sid"] == "1A7G"
        assert any("carries the structure's id (1A7G)" in unescaped(c.value) for c in at.caption)
        linked = start({"seq": sequence, "page": "structure", "sid": "1A7G"})
        assert_clean(linked)
        assert unescaped(linked.success[0].value).startswith("chain E: 82 residues, 82 aligned, identity 100.0%")
        assert any("PDB entry 1A7G (RCSB)" in unescaped(c.value) for c in linked.caption)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def test_a_local_path_opens_here_and_never_in_hosted_mode(monkeypatch):
    at = structure_page()
    at.text_input(key="_w_structure_path").input(str(STRUCTURES / "2BEG.pdb")).run()
    next(b for b in at.button if b.label == "Open").click().run()
    assert_clean(at)
    assert len(figures(at)) == 1 and scene(at)

    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    at = structure_page()
    assert_clean(at)
    assert "_w_structure_path" not in [t.key for t in at.text_input]
    assert not [b for b in at.button if b.label == "Open"]
    assert [t.key for t in at.text_input] == ["_w_structure_fetch_id"]  # downloads are allowed


def test_every_widget_of_the_page_is_kept():
    """As test_app's check: each selection is a kept widget whose default is its current value."""
    at = upload(structure_page(), "2BEG.pdb")
    for track in ("entropy", "attention", "substitution", "pca"):
        at.selectbox(key="_w_strack").set_value(track).run()
        assert_clean(at)
        for kind in ("selectbox", "radio", "number_input", "text_input"):
            for widget in at.get(kind):
                assert (widget.key or "").startswith("_w_"), f"{kind} {widget.label!r} is not a kept widget"
                if kind in ("selectbox", "radio"):
                    assert widget.options[widget.proto.default] == widget.format_func(widget.value), widget.key
                else:
                    assert widget.proto.default == widget.value, widget.key
    open_page(at, "input")
    open_page(at, "structure")  # the structure and the selections survive a page switch
    assert_clean(at)
    assert at.selectbox(key="_w_strack").value == "pca" and len(figures(at)) == 1 and scene(at)


def test_without_input_the_page_takes_a_structure_whose_chain_becomes_the_record():
    """No sequence yet: the page points to the Input page and still takes a structure (issue #37,
    item 4); "Use chain A's sequence" makes 1GBT's chain A the record, numbered from the file
    (16), and the page then aligns it to its own chain at 100%."""
    at = open_page(start(), "structure")
    assert_clean(at)
    assert any("Input" in i.value for i in at.info) and at.get("file_uploader")
    upload(at, "1GBT.cif")
    assert_clean(at)
    assert [b.label for b in at.button if b.label.startswith("Use chain")] == ["Use chain A's sequence"]
    next(b for b in at.button if b.label == "Use chain A's sequence").click().run()
    assert_clean(at)
    amino_acids = [r for r in read_reference(STRUCTURES / "1GBT.cif", "A") if not r.hetero and r.name != "HOH"]
    assert at.session_state["record"] == f"1GBT_A/{amino_acids[0].label}-{amino_acids[-1].label}" == "1GBT_A/16-245"
    assert any("223 aligned, identity 100.0%" in unescaped(s.value) for s in at.success)
    assert not [b for b in at.button if b.label.startswith("Use chain")]  # the record is the chain


def test_a_full_heavy_queue_leaves_the_rest_of_the_page(monkeypatch):
    """Hosted, a 446-residue record (1GBT's chain twice: over the 400 residues whose contacts are
    queued) while another session holds the only slot: the contact parts wait with a warning,
    the 3D view (entropy: no queue) is drawn; once the slot is free, everything is."""
    from app_pages._ui.server import heavy_jobs

    for name, value in {"FLAMINO_HOSTED": "1", "FLAMINO_MAX_RESIDUES": "1000", "FLAMINO_MAX_UPLOAD_BYTES": "1000000"}.items():
        monkeypatch.setenv(name, value)
    queue = heavy_jobs.HeavyJobQueue(workers=1, max_waiting=0)
    monkeypatch.setattr(heavy_jobs, "_QUEUE", queue)
    sequence = reference_case("1GBT.cif")[0] * 2
    at = structure_page(sequence)
    with queue.slot():
        upload(at, "1GBT.cif")
        assert not at.exception and not at.error
        assert any("contact map was not computed" in w.value for w in at.warning)
        assert not at.dataframe and not figures(at) and viewer_title(at) == "Chain A of 1GBT.cif: entropy (bits)"
        assert unescaped(at.success[0].value).endswith("identity 100.0%, coverage 50.0% of the sequence")
    at.run()
    assert_clean(at)
    assert len(at.dataframe[0].value) == 12 and len(figures(at)) == 1 and scene(at)["contacts"]


def test_hosted_upload_limit_is_said_before_and_a_refusal_in_words_after(monkeypatch):
    """Issue 24: a file over a hosted server's limit got only a red icon on its chip. The label
    says the limit (and that .gz is accepted) before; a file over it reaches the server (the
    browser's cap is twice the limit) and is refused in words, without the "Upload a PDB" prompt."""
    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    monkeypatch.setenv("FLAMINO_MAX_UPLOAD_BYTES", "100000")
    at = structure_page()
    (uploader,) = at.get("file_uploader")
    label = uploader.proto.label  # 100,000 bytes: 98 KiB
    assert "gzipped .gz accepted" in label and "up to 98 KiB per file on this server" in label
    size = (STRUCTURES / "2BEG.pdb").stat().st_size
    assert 100_000 < size
    upload(at, "2BEG.pdb")
    assert not at.exception
    assert any(f"2BEG.pdb is {size / 1024:,.0f} KiB; this server accepts up to 98 KiB" in unescaped(e.value)
               for e in at.error), [e.value for e in at.error]
    assert not any("Upload a PDB" in i.value for i in at.info) and scene(at) is None


def test_an_uploaded_structure_is_said_not_to_travel_in_the_link():
    at = upload(structure_page(), "2BEG.pdb")
    assert_clean(at)
    assert "sid" not in at.query_params
    said = [unescaped(c.value) for c in at.caption if "does not carry the structure file" in c.value]
    assert len(said) == 2  # on the page and in the share panel


def test_a_structure_on_the_input_page_gives_the_records_the_command_line_reads(tmp_path):
    """Issue 50: the Input page and ``flamino embed`` read a structure through one function
    (``chain_records.structure_records``): the same record ids and sequences, and the same note."""
    from test_app import upload as upload_input

    from flamino_core.cli import main

    data = (STRUCTURES / "1GBT.cif").read_bytes()
    at = upload_input(start(), [("1GBT.cif", data)])
    assert_clean(at)
    shown = at.dataframe[0].value
    assert list(shown["id"]) == ["1GBT_A/16-245"]
    note = "structure, 1 protein chain (chain A: 223 amino acids, residues 16–245 in the file's numbering"
    assert any(t.value.startswith(f"1GBT.cif · {note}") for t in at.text)  # the Input page's file list
    out = tmp_path / "1gbt.npz"
    assert main(["embed", str(STRUCTURES / "1GBT.cif"), "-m", "random:tiny", "-o", str(out)]) == 0
    assert list(np.load(out)["ids"]) == list(shown["id"])
    assert at.session_state["record"] == "1GBT_A/16-245"
    assert len(np.load(out)["sequences"][0]) == 223
