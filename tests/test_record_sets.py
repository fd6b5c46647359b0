"""Sets of records in the core: header metadata, tables joined on records, the ProtSpace files,
the records' map and the summary rows."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from flamino_core import protspace, record_map
from flamino_core.fasta import ProteinRecord, read_fasta
from flamino_core.record_metadata import header_fields, join_table, metadata_rows
from flamino_core.record_summary import ENTROPY_COLUMN, PPPL_COLUMN, mean_entropy, summary_rows

RNG = np.random.default_rng(7)


def test_uniprot_headers_of_the_shared_file(shared_fasta):
    """Values as the two headers of uniprot_two.fa spell them (read off the file)."""
    first, second = (header_fields(r.id, r.description) for r in read_fasta(shared_fasta / "uniprot_two.fa").records)
    assert first == {
        "database": "sp", "accession": "P55685", "entry_name": "Y4WG_RHISN",
        "protein_name": "Uncharacterized protein y4wG", "organism": "Rhizobium sp. (strain NGR234)",
        "gene_name": "NGR_a00980", "protein_existence": 4,
    }  # fmt: skip
    assert (second["organism"], second["gene_name"], second["accession"]) == ("Aspergillus oryzae", "hacA", "Q1XGE2")


@pytest.mark.parametrize(
    "record_id, description, expected",
    [
        ("NP_000509.1", "hemoglobin subunit beta [Homo sapiens]",
         {"protein_name": "hemoglobin subunit beta", "organism": "Homo sapiens"}),
        ("UniRef50_P68871", "Hemoglobin subunit beta n=1042 Tax=Gnathostomata TaxID=7776 RepID=HBB_HUMAN",
         {"protein_name": "Hemoglobin subunit beta", "organism": "Gnathostomata", "taxon_id": 7776}),
        ("SECY_CHLTR/73-433", "", {"start": 73, "end": 433}),
        ("HBB_HUMAN/3-147", "P68871.1", {"accession": "P68871", "start": 3, "end": 147}),  # Pfam: not a name
        ("A0A0A0MRZ8_HUMAN/62-306", "A0A0A0MRZ8.1", {"accession": "A0A0A0MRZ8", "start": 62, "end": 306}),
        ("tr|A0A024R161|A0A024R161_HUMAN", "Guanine nucleotide-binding protein subunit gamma OS=Homo sapiens OX=9606 "
         "GN=DNAJC25-GNG10 PE=3 SV=1",
         {"database": "tr", "accession": "A0A024R161", "entry_name": "A0A024R161_HUMAN", "taxon_id": 9606,
          "protein_name": "Guanine nucleotide-binding protein subunit gamma", "organism": "Homo sapiens",
          "gene_name": "DNAJC25-GNG10", "protein_existence": 3}),
        ("my_protein", "", {}),
    ],
)  # fmt: skip
def test_other_header_conventions(record_id, description, expected):
    assert header_fields(record_id, description) == expected


def test_metadata_rows_have_every_field_any_record_has():
    records = [ProteinRecord("sp|P1|A_HUMAN", "x OS=Homo sapiens", "MKV"), ProteinRecord("plain", "", "MK")]
    assert metadata_rows(records) == [
        {"id": "sp|P1|A_HUMAN", "length": 3, "organism": "Homo sapiens", "protein_name": "x", "database": "sp",
         "accession": "P1", "entry_name": "A_HUMAN"},
        {"id": "plain", "length": 2, "organism": None, "protein_name": None, "database": None, "accession": None,
         "entry_name": None},
    ]  # fmt: skip


def test_a_table_joins_on_ids_or_accessions():
    records = [ProteinRecord("sp|P68871|HBB_HUMAN", "", "MV"), ProteinRecord("mine", "", "MK"),
               ProteinRecord("other", "", "MK")]  # fmt: skip
    tsv = b"Identifier\tscore\tclade\nP68871\t0.5\tA\nmine\t2\tB\nunused\t9\tC\n"
    columns, notes = join_table(records, tsv)
    assert columns == {"score": [0.5, 2, None], "clade": ["A", "B", None]}
    assert notes == ["joined 2 of 3 record(s) on the table's 'Identifier' column", "no row for other"]
    columns, _ = join_table(records, b"name,x\nmine,1\n")  # no known id column: the first
    assert columns == {"x": [None, 1, None]}
    with pytest.raises(ValueError, match="id column"):
        join_table(records, b"only_one_column\nmine\n")


def test_protspace_h5_reads_back_keyed_by_identifier():
    h5py = pytest.importorskip("h5py")
    ids = ["sp|P68871|HBB_HUMAN", "HBB_HUMAN/2-147", "HBB_HUMAN_2-147"]
    means = RNG.normal(size=(3, 8)).astype(np.float32)
    data = protspace.h5_bytes(ids, means, protspace.model_label("random:tiny"))
    with h5py.File(io.BytesIO(data), "r") as handle:
        assert handle.attrs["model_name"] == "random:tiny"
        names = ["sp|P68871|HBB_HUMAN", "HBB_HUMAN_2-147", "HBB_HUMAN_2-147_2"]  # '/' is HDF5's separator
        assert sorted(handle) == sorted(names)
        for name, vector in zip(names, means, strict=True):
            assert handle[name].shape == (8,) and handle[name].dtype == np.float32
            np.testing.assert_array_equal(handle[name][()], vector)
        assert handle["HBB_HUMAN_2-147"].attrs["original_id"] == "HBB_HUMAN/2-147"
        assert "original_id" not in handle["sp|P68871|HBB_HUMAN"].attrs


def test_protspace_metadata_csv_starts_with_the_dataset_names():
    records = [ProteinRecord("a/1-3", "x OS=Homo sapiens", "MKV"), ProteinRecord("b", "", "MK")]
    rows = list(csv.DictReader(io.StringIO(protspace.metadata_csv(records, {"family": ["f1", None]}))))
    assert list(rows[0]) == ["identifier", "record_id", "length", "organism", "protein_name", "start", "end", "family"]
    assert [(r["identifier"], r["record_id"], r["family"]) for r in rows] == [("a_1-3", "a/1-3", "f1"), ("b", "b", "")]


def test_model_label_names_no_local_folder(tmp_path):
    folder = tmp_path / "secret" / "esm2-650M"
    folder.mkdir(parents=True)
    assert protspace.model_label(str(folder)) == "esm2-650M"
    assert protspace.model_label("esm2_t33_650M_UR50D") == "esm2_t33_650M_UR50D"
    assert protspace.model_label("facebook/esm2_t6_8M_UR50D") == "facebook/esm2_t6_8M_UR50D"


def test_pca_map_matches_scikit_learn():
    decomposition = pytest.importorskip("sklearn.decomposition")
    means = RNG.normal(size=(9, 16))
    projection = record_map.project(means, "pca")
    reference = decomposition.PCA(n_components=2).fit(means)
    # Same axes up to sign (PCA's sign is a convention); 1e-9: both are float64 SVDs.
    np.testing.assert_allclose(np.abs(projection.coords), np.abs(reference.transform(means)), atol=1e-9)
    assert projection.axis_titles[0] == f"PC1 ({100 * reference.explained_variance_ratio_[0]:.1f}%)"


def test_umap_falls_back_to_pca_with_a_reason(monkeypatch):
    monkeypatch.setattr(record_map, "umap_available", lambda: True)
    small = record_map.project(RNG.normal(size=(3, 4)), "umap")
    assert small.method == "pca" and "at least 5 records" in small.note
    monkeypatch.setattr(record_map, "umap_available", lambda: False)
    missing = record_map.project(RNG.normal(size=(9, 4)), "umap")
    assert missing.method == "pca" and "pip install 'flamino[umap]'" in missing.note


def test_umap_is_deterministic_when_installed():
    if not record_map.umap_available():
        pytest.skip("umap-learn is not installed (the optional 'umap' extra)")
    means = np.concatenate([RNG.normal(0, 1, size=(8, 6)), RNG.normal(8, 1, size=(8, 6))])
    first, second = record_map.project(means, "umap"), record_map.project(means, "umap")
    np.testing.assert_array_equal(first.coords, second.coords)
    # Two well-separated clusters stay apart: every point is nearer its own cluster's centre.
    centres = first.coords[:8].mean(0), first.coords[8:].mean(0)
    own = np.linalg.norm(first.coords - np.repeat(centres, 8, axis=0), axis=1)
    other = np.linalg.norm(first.coords - np.repeat(centres[::-1], 8, axis=0), axis=1)
    assert (own < other).all()


def test_the_map_colours_numbers_by_scale_and_categories_by_legend():
    projection = record_map.project(RNG.normal(size=(30, 4)))
    ids = [f"r{i}" for i in range(30)]
    lengths = list(range(100, 130))
    scaled = record_map.record_map_figure(projection, ids, lengths, "length")
    assert scaled.data[0].marker.colorbar.title.text == "length" and list(scaled.data[0].marker.color) == lengths
    few = record_map.record_map_figure(projection, ids, [i % 3 for i in range(30)], "PE")
    assert sorted(t.name for t in few.data) == ["0", "1", "2"]
    many = record_map.record_map_figure(projection, ids, [f"c{i}" for i in range(30)], "clade")
    assert len(many.data) == record_map.MAX_CATEGORIES + 1 and many.data[-1].name == "other (10 values)"
    assert sum(len(t.x) for t in many.data) == 30
    ringed = record_map.record_map_figure(projection, ids, selected="r4", labels=False)
    assert ringed.data[0].mode == "markers" and ringed.data[-1].name == "selected: r4"
    assert (ringed.data[-1].x[0], ringed.data[-1].y[0]) == tuple(projection.coords[4])


def test_summary_rows_and_mean_entropy():
    uniform = np.zeros((4, 33))
    assert mean_entropy(uniform) == pytest.approx(np.log2(20))  # every amino acid equally likely
    records = [ProteinRecord("sp|P1|A_HUMAN", "x OS=Homo sapiens GN=A", "MKVL"), ProteinRecord("b", "", "MK")]
    rows = summary_rows(records, {"b": 1.5}, {"sp|P1|A_HUMAN": 3.0})
    assert rows == [
        {"id": "sp|P1|A_HUMAN", "length": 4, "organism": "Homo sapiens", "gene_name": "A", "protein_name": "x",
         "accession": "P1", ENTROPY_COLUMN: None, PPPL_COLUMN: 3.0},
        {"id": "b", "length": 2, "organism": None, "gene_name": None, "protein_name": None, "accession": None,
         ENTROPY_COLUMN: 1.5, PPPL_COLUMN: None},
    ]  # fmt: skip
