"""The app on inputs as people have them and on sets of sequences, under ``AppTest`` on the
untrained ``random:tiny`` model: flat files and DNA on the Input page, the Records table, the
records' map (metadata colours, a joined table, labels, the selected record, UMAP) and the
ProtSpace export. Expected values are computed here from the engine or the inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from flamino_core.alphabet import AA_TO_IDX, STANDARD_AMINO_ACIDS
from flamino_core.engine.engine import Engine
from flamino_core.weights.loading import load_weights

from app_pages._ui.frame.links import decode_fasta
from test_app import UBIQUITIN, assert_clean, figures, open_page, paste, settle, start, unescaped, upload, values

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
DATA = Path(__file__).resolve().parents[1] / "data"
HBB = ("MVHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTPDAVMGNPKVKAHGKKVLGAFSDGLAHLDNLKGTFATLSELHCDKLHVDPENF"
       "RLLGNVLVCVLAHHFGKEFTPPVQAAYQKVVAGVANALAHKYH")  # UniProt P68871  # fmt: skip
# Five records in UniProt's FASTA format: two organisms, three genes, one Pfam-style span.
SET = [
    ("sp|P0CG47|UBB_HUMAN", "Polyubiquitin-B OS=Homo sapiens OX=9606 GN=UBB PE=1 SV=1", UBIQUITIN),
    ("sp|P68871|HBB_HUMAN", "Hemoglobin subunit beta OS=Homo sapiens OX=9606 GN=HBB PE=1 SV=2", HBB),
    ("sp|P02088|HBB1_MOUSE", "Hemoglobin subunit beta-1 OS=Mus musculus OX=10090 GN=Hbb-b1 PE=1 SV=2", HBB[:120]),
    ("sp|P0CG49|UBB_MOUSE", "Polyubiquitin-B OS=Mus musculus OX=10090 GN=Ubb PE=1 SV=1", UBIQUITIN[:60]),
    ("HBB_HUMAN/2-147", "P68871.1", HBB[1:]),  # as Pfam writes its members: the accession, versioned
]
SET_FASTA = "".join(f">{i} {d}".rstrip() + f"\n{s}\n" for i, d, s in SET)


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FLAMINO_MODEL", "random:tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(load_weights("random:tiny"))


def link(at) -> dict[str, str]:
    """The query parameters the app published (the last value of each)."""
    return {k: v[-1] if isinstance(v, list) else v for k, v in dict(at.query_params).items()}


def shown(at) -> list[str]:
    return [unescaped(e.value) for e in (*at.error, *at.warning, *at.info)]


def ordered_labels(at) -> list[str]:
    """Subheaders and widget labels of the main area, in page order."""
    out = []
    for node in at.main:
        if node.type == "subheader":
            out.append(f"## {node.value}")
        elif getattr(node, "label", None) and node.type in ("radio", "selectbox", "toggle"):
            out.append(node.label)
    return out


# --- item 4: input as people paste it ----------------------------------------------------------
@pytest.mark.parametrize(
    "name, record_id", [("HBB_HUMAN.swiss.txt", "sp|P68871|HBB_HUMAN"), ("NP_000509.gp", "NP_000509.1")]
)
def test_a_pasted_flat_file_is_read_and_says_what_was_read(name, record_id):
    at = paste(start(), (DATA / name).read_text())
    assert_clean(at)
    assert list(at.dataframe[0].value["id"]) == [record_id]
    assert list(at.dataframe[0].value["length"]) == [147]
    assert any(f"{record_id}: read" in s for s in shown(at))


def test_a_uniprot_web_paste_and_an_origin_block_are_read():
    blocks = [HBB[i:i + 10] for i in range(0, len(HBB), 10)]
    narrow = "\n".join(
        f"{(i + 1) * 10:>10}{(i + 2) * 10:>11}\n" + " ".join(blocks[i:i + 2]).lower() for i in range(0, len(blocks), 2)
    )  # two blocks per line: "        10         20" over them, once refused as PHYLIP
    at = paste(start(), narrow)
    assert_clean(at)
    assert list(at.dataframe[0].value["length"]) == [147]
    origin = (DATA / "NP_000509.gp").read_text().split("ORIGIN", 1)[1]
    at = paste(at, "ORIGIN" + origin)
    assert_clean(at)
    assert list(at.dataframe[0].value["length"]) == [147]
    assert any("GenBank ORIGIN block" in s for s in shown(at))


def test_dna_is_said_first_and_analysed_only_when_the_user_insists():
    dna = "ATGGTGCACCTGACTCCTGAGGAGAAGTCTGCCGTTACTGCC" * 8000  # 336 kb, a genome-sized upload
    at = upload(start(), [("contig.fa", f">contig\n{dna}\n".encode())])
    assert not at.exception
    errors = [unescaped(e.value) for e in at.error]
    assert any("contig: this is nucleotide sequence, not protein" in e for e in errors)
    assert not any("limit" in e for e in errors)  # the length comes second
    assert any("nucleotide sequence" in i.value and "translate" in i.value for i in at.info)
    box = at.checkbox(key="_w_dna")
    assert box.label == "Analyse nucleotide sequences as protein anyway" and box.value is False

    at = paste(start(), f">short_dna\n{dna[:300]}\n")
    assert not at.dataframe and any("short_dna: this is nucleotide" in e for e in map(unescaped, (e.value for e in at.error)))
    at.checkbox(key="_w_dna").check().run()
    assert_clean(at)
    assert list(at.dataframe[0].value["id"]) == ["short_dna"]
    assert any("analysed as protein as asked" in w for w in map(unescaped, (w.value for w in at.warning)))
    open_page(at, "predictions")
    assert_clean(at)
    assert figures(at)  # analysed as the user asked
    assert link(at)["dna"] == "1"  # and the link says so


def test_a_long_sequence_is_warned_about_once():
    at = upload(start(), [("long.fa", f">long\n{UBIQUITIN * 15}\n".encode())])
    assert_clean(at)
    warnings = [w.value for w in at.warning if "1022" in w.value]
    assert len(warnings) == 1 and unescaped(warnings[0]).count("longer than 1022 residues") == 1


def test_a_link_carries_the_records_of_pasted_text_and_files():
    at = paste(start(), f">pasted\n{UBIQUITIN}\n")
    upload(at, [("hbb.fa", f">hbb\n{HBB}\n".encode())])
    assert_clean(at)
    text = decode_fasta(link(at)["fasta"])
    assert ">pasted\n" in text and ">hbb\n" in text
    again = start(link(at))
    assert_clean(again)
    assert list(again.dataframe[0].value["id"]) == ["pasted", "hbb"]


# --- item 5: sets of sequences -----------------------------------------------------------------
def test_records_table_has_length_metadata_entropy_and_queued_pseudo_perplexity(engine):
    at = settle(open_page(paste(start(), SET_FASTA), "records"))
    assert_clean(at)
    table = at.dataframe[0].value
    assert list(table["id"]) == [i for i, _, _ in SET]
    assert list(table["length"]) == [len(s) for _, _, s in SET]
    assert list(table["organism"])[:4] == ["Homo sapiens", "Homo sapiens", "Mus musculus", "Mus musculus"]
    assert list(table["gene_name"])[:4] == ["UBB", "HBB", "Hbb-b1", "Ubb"]
    assert "pseudo-perplexity" not in table  # not until asked: it costs L passes a record
    # Issue 24: a Pfam header's accession is not a protein name, and no cell reads "None".
    assert list(table["protein_name"]) == ["Polyubiquitin-B", "Hemoglobin subunit beta", "Hemoglobin subunit beta-1",
                                           "Polyubiquitin-B", ""]
    assert list(table["accession"]) == ["P0CG47", "P68871", "P02088", "P0CG49", "P68871"]
    assert not table.isna().any().any() and "None" not in table.astype(str).to_numpy()
    std = [AA_TO_IDX[aa] for aa in STANDARD_AMINO_ACIDS]
    for value, (_, _, sequence) in zip(table["mean entropy (bits)"], SET, strict=True):
        (out,) = engine.run([sequence], repr_layers=(), logits=True)
        p = np.exp(out.logits.astype(np.float64) - out.logits.max(axis=1, keepdims=True))[:, std]
        p /= p.sum(axis=1, keepdims=True)  # the 20 amino acids, renormalised
        expected = float(np.mean(-(p * np.log2(p)).sum(axis=1)))
        assert value == pytest.approx(expected, abs=1e-4)  # float32 logits: agreement to ~1e-6 bits

    settle(next(b for b in at.button if b.label == "Compute pseudo-perplexity").click().run())
    assert_clean(at)
    table = at.dataframe[0].value
    for value, (_, _, sequence) in zip(table["pseudo-perplexity"], SET, strict=True):
        log_probs = engine.compute_masked(sequence)
        expected = np.exp(-np.mean([log_probs[i, AA_TO_IDX[aa]] for i, aa in enumerate(sequence)]))
        assert value == pytest.approx(expected, rel=1e-4)
    assert "Records table (CSV)" in {b.proto.label for b in at.get("download_button")}


def test_the_records_map_has_its_own_controls_colours_labels_and_the_selected_record():
    at = settle(open_page(paste(start(), SET_FASTA), "embeddings"))
    assert_clean(at)
    labels = ordered_labels(at)
    residue, records = labels.index("## Per-residue embeddings"), labels.index("## Per-sequence mean embeddings")
    assert residue < labels.index("Projection") < labels.index("Colour residues by") < records
    assert records < labels.index("Map") < labels.index("Colour records by") < labels.index("Labels")

    colour = at.selectbox(key="_w_scolour")
    assert {"organism (OS=)", "gene (GN=)", "start (/start-end)"} <= set(colour.options)  # labels shown
    assert colour.value == "organism"  # the first header field that groups the records (issue 50)
    colour.set_value("organism").run()
    record_fig = figures(at)[2]
    by_name = {t["name"]: t["text"] for t in record_fig["data"]}
    assert by_name["Homo sapiens"] == ["sp|P0CG47|UBB_HUMAN", "sp|P68871|HBB_HUMAN"]
    assert by_name["Mus musculus"] == ["sp|P02088|HBB1_MOUSE", "sp|P0CG49|UBB_MOUSE"]
    assert by_name["no value"] == ["HBB_HUMAN/2-147"]
    assert all(t["mode"] == "markers+text" for t in record_fig["data"])

    at.toggle(key="_w_slabels").set_value(False).run()
    at.sidebar.selectbox(key="_w_record").set_value("sp|P02088|HBB1_MOUSE").run()
    assert_clean(at)
    record_fig = figures(at)[2]
    *points, ring = record_fig["data"]
    assert all(t["mode"] == "markers" for t in points)  # labels off
    assert ring["name"] == "selected: sp|P02088|HBB1_MOUSE" and ring["text"] == ["sp|P02088|HBB1_MOUSE"]
    mouse = next(t for t in points if t["name"] == "Mus musculus")
    assert values(ring["x"]) == [values(mouse["x"])[0]] and values(ring["y"]) == [values(mouse["y"])[0]]


def test_the_records_map_is_coloured_by_an_uploaded_table_joined_on_accession_or_id():
    at = settle(open_page(paste(start(), SET_FASTA), "embeddings"))
    table = b"accession,family\nP0CG47,ubiquitin\nP68871,globin\nP02088,globin\nHBB_HUMAN/2-147,globin\n"
    at.file_uploader(key="_record_table_upload").set_value(("families.csv", table, "text/csv")).run()
    assert_clean(at)
    captions = unescaped(" ".join(c.value for c in at.caption))
    assert "families.csv: joined 4 of 5 record(s) on the table's 'accession' column" in captions
    assert "families.csv: no row for sp|P0CG49|UBB_MOUSE" in captions
    at.selectbox(key="_w_scolour").set_value("table:family").run()
    by_name = {t["name"]: t["text"] for t in figures(at)[2]["data"]}
    assert by_name["globin"] == ["sp|P68871|HBB_HUMAN", "sp|P02088|HBB1_MOUSE", "HBB_HUMAN/2-147"]
    assert by_name["ubiquitin"] == ["sp|P0CG47|UBB_HUMAN"] and by_name["no value"] == ["sp|P0CG49|UBB_MOUSE"]


def test_the_records_map_and_table_read_the_headers_own_key_value_pairs():
    """ProteinGym-style headers (issue 37): ``taxon=`` is a column of the Records table and a
    "Colour records by" choice, no table needed; the pairs are no longer one protein name."""
    fasta = "".join(f">p{i} taxon={taxon} score={i}\n{UBIQUITIN[: 40 + i]}\n"
                    for i, taxon in enumerate(["Virus", "Human", "Human"]))  # fmt: skip
    at = settle(open_page(paste(start(), fasta), "records"))
    assert_clean(at)
    table = at.dataframe[0].value
    assert list(table["taxon"]) == ["Virus", "Human", "Human"] and "protein_name" not in table
    at = settle(open_page(at, "embeddings"))
    colour = at.selectbox(key="_w_scolour")
    assert {"taxon", "score"} <= set(colour.options) and "protein name" not in colour.options
    # Coloured by taxon= before any choice (issue 50: by "nothing"); score= names each record, not a group.
    assert colour.value == "header:taxon"
    by_name = {t["name"]: t["text"] for t in figures(at)[2]["data"]}
    assert by_name["Human"] == ["p1", "p2"] and by_name["Virus"] == ["p0"]
    colour.set_value("none").run()  # a choice is kept
    assert_clean(at)
    assert at.selectbox(key="_w_scolour").value == "none"
    assert not {"Human", "Virus"} & {t["name"] for t in figures(at)[2]["data"]}  # one trace of points (+ the ring)


def test_umap_when_installed_and_a_clear_note_when_not(monkeypatch):
    import streamlit as st

    from flamino_core.records import embedding_map as record_map

    at = settle(open_page(paste(start(), SET_FASTA), "embeddings"))
    if record_map.umap_available():
        at.radio(key="_w_smap").set_value("umap").run()
        assert_clean(at)
        assert figures(at)[2]["layout"]["xaxis"]["title"]["text"] == "UMAP 1"
        assert "(UMAP)" in figures(at)[2]["layout"]["title"]["text"]
    st.cache_data.clear()
    monkeypatch.setattr(record_map, "umap_available", lambda: False)
    at.radio(key="_w_smap").set_value("umap").run()
    assert_clean(at)
    assert any("UMAP needs umap-learn (pip install 'flamino[umap]'); showing PCA" in i.value for i in at.info)
    assert figures(at)[2]["layout"]["xaxis"]["title"]["text"].startswith("PC1")


def test_the_records_export_for_protspace(monkeypatch):
    from app_pages._ui.frame import downloads as frame_downloads

    names = {}
    real = frame_downloads._button

    def caught(label, data, file_name, *rest, **keywords):
        names[label] = file_name
        return real(label, data, file_name, *rest, **keywords)

    monkeypatch.setattr(frame_downloads, "_button", caught)
    at = settle(open_page(paste(start(), SET_FASTA), "embeddings"))
    # The model in every name (issue 50): two models' exports of one set read alike.
    assert names["Mean embeddings (NPZ)"] == "records_random_tiny_layer2_mean_embeddings.npz"
    assert names["Metadata for ProtSpace (CSV)"] == "records_random_tiny_layer2_metadata.csv"
    downloads = {b.proto.label for b in at.get("download_button")}
    assert {"Mean embeddings (NPZ)", "Map coordinates and metadata (CSV)", "Metadata for ProtSpace (CSV)"} <= downloads
    try:
        import h5py  # noqa: F401
    except ImportError:
        assert any("needs the h5py package" in c.value for c in at.caption)
    else:
        assert "Embeddings for ProtSpace (HDF5)" in downloads
