"""Sets of records in the core: header metadata, tables joined on records, the ProtSpace files,
the records' map and the summary rows."""

from __future__ import annotations

import csv
import io
from collections import Counter

import numpy as np
import pytest

from flamino_core.records import protspace, embedding_map as record_map
from flamino_core.inputs.fasta import ProteinRecord, read_fasta
from flamino_core.figures.style import MISSING_COLOUR, OTHER_COLOUR, SAFE_CATEGORY_COLOURS, _qualitative
from flamino_core.records.metadata import (MAX_HEADER_COLUMNS, colour_values, grouping_column, header_fields,
                                          join_table, metadata_rows)
from flamino_core.analysis.outputs import residue_entropy
from flamino_core.records.summary import ENTROPY_COLUMN, PPPL_COLUMN, summary_rows

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
    assert len(many.data) == 12 and many.data[-1].name == "other (19 values)"  # 11 colours, then "other"
    assert sum(len(t.x) for t in many.data) == 30
    ringed = record_map.record_map_figure(projection, ids, selected="r4", labels=False)
    assert ringed.data[0].mode == "markers" and ringed.data[-1].name == "selected: r4"
    assert (ringed.data[-1].x[0], ringed.data[-1].y[0]) == tuple(projection.coords[4])


def test_summary_rows_and_mean_entropy():
    uniform = np.zeros((4, 33))
    assert residue_entropy(uniform) == pytest.approx([np.log2(20)] * 4)  # every amino acid equally likely
    records = [ProteinRecord("sp|P1|A_HUMAN", "x OS=Homo sapiens GN=A", "MKVL"), ProteinRecord("b", "", "MK")]
    rows = summary_rows(records, {"b": 1.5}, {"sp|P1|A_HUMAN": 3.0})
    assert rows == [
        {"id": "sp|P1|A_HUMAN", "length": 4, "organism": "Homo sapiens", "gene_name": "A", "protein_name": "x",
         "accession": "P1", ENTROPY_COLUMN: None, PPPL_COLUMN: 3.0},
        {"id": "b", "length": 2, "organism": None, "gene_name": None, "protein_name": None, "accession": None,
         ENTROPY_COLUMN: 1.5, PPPL_COLUMN: None},
    ]  # fmt: skip


# Header metadata (issue 37): one parser, ``record_metadata.header_fields``, for the Records
# table, the map's colours and the ProtSpace export.


def test_the_shared_proteingym_headers_read_as_columns(shared_fasta):
    """``>A0A140D2T1_ZIKV taxon=Virus selection=OrganismalFitness assay=...``: three columns, no
    protein name. The counts were read off the file with grep, not with this parser."""
    records = read_fasta(shared_fasta / "proteingym_targets.fa").records
    rows = metadata_rows(records)
    assert list(rows[0]) == ["id", "length", "taxon", "selection", "assay"]
    assert rows[0] == {"id": "A0A140D2T1_ZIKV", "length": len(records[0].sequence), "taxon": "Virus",
                       "selection": "OrganismalFitness", "assay": "A0A140D2T1_ZIKV_Sourisseau_2019"}  # fmt: skip
    assert Counter(r["taxon"] for r in rows) == {"Human": 81, "Prokaryote": 43, "Eukaryote": 34, "Virus": 28}
    assert Counter(r["selection"] for r in rows) == {"Stability": 66, "OrganismalFitness": 62, "Activity": 35,
                                                     "Expression": 13, "Binding": 10}  # fmt: skip
    assert len({r["assay"] for r in rows}) == 186
    summary = summary_rows(records[:1])[0]
    assert (summary["taxon"], summary["selection"]) == ("Virus", "OrganismalFitness") and "protein_name" not in summary


@pytest.mark.parametrize(
    "record_id, description, expected",
    [
        ("sp|P69905|HBA_HUMAN", "Hemoglobin subunit alpha OS=Homo sapiens OX=9606 GN=HBA1 PE=1 SV=2",
         {"database": "sp", "accession": "P69905", "entry_name": "HBA_HUMAN", "protein_name": "Hemoglobin subunit alpha",
          "organism": "Homo sapiens", "taxon_id": 9606, "gene_name": "HBA1", "protein_existence": 1}),  # SV= left out
        ("WP_000001.1", "protein name [Escherichia coli]", {"protein_name": "protein name", "organism": "Escherichia coli"}),
        ("s1", 'strain="K-12 substr. MG1655" host=human', {"strain": "K-12 substr. MG1655", "host": "human"}),
        ("s2", 'kinase note="a = b" score=0.5', {"protein_name": "kinase", "note": "a = b", "score": 0.5}),
        ("s3", 'note="never closed x=1', {"note": '"never closed', "x": 1}),  # no closing quote: runs to the next key
        ("seq1|Virus|2019", "", {"id_part_2": "Virus", "id_part_3": 2019}),
        ("seq2|taxon=Virus|assay=a_b", "", {"taxon": "Virus", "assay": "a_b"}),
        ("contig_1_1", "# 2 # 1000 # 1 # ID=1_1;partial=00;start_type=ATG;gc_cont=0.55",  # Prodigal
         {"protein_name": "# 2 # 1000 # 1 #", "ID": "1_1", "partial": "00", "start_type": "ATG", "gc_cont": 0.55}),
        ("s4", "taxon=Homo sapiens | assay=a=b", {"taxon": "Homo sapiens", "assay": "a=b"}),
        ("s5", "length=12 id=x record_id=y empty= n=3", {"header_length": 12, "header_id": "x", "header_record_id": "y",
                                                      "n": 3}),  # the rows' own columns kept apart; n= off UniRef kept
        ("s6", "Na+/K+ ATPase (Km=3 uM)", {"protein_name": "Na+/K+ ATPase (Km=3 uM)"}),  # "=" inside a word
        ("s7", "alcohol dehydrogenase EC=1.1.1.1", {"protein_name": "alcohol dehydrogenase", "EC": "1.1.1.1"}),
    ],
)  # fmt: skip
def test_header_shapes(record_id, description, expected):
    assert header_fields(record_id, description) == expected


def test_the_protspace_table_is_byte_identical_where_it_had_columns(shared_fasta):
    """UniProt, NCBI, UniRef, Pfam and plain headers: the CSV ``flamino embed -o OUT.h5`` wrote
    before issue 37 (commit 30d0513), byte for byte."""
    records = [*read_fasta(shared_fasta / "uniprot_two.fa").records, *read_fasta(shared_fasta / "HBB_HUMAN.fa").records,
               ProteinRecord("NP_000509.1", "hemoglobin subunit beta [Homo sapiens]", "MVHLT"),
               ProteinRecord("UniRef50_P68871", "Hemoglobin subunit beta n=1042 Tax=Gnathostomata TaxID=7776 "
                             "RepID=HBB_HUMAN", "MVHL"),
               ProteinRecord("HBB_HUMAN/3-147", "P68871.1", "MVH"),
               ProteinRecord("sp|P69905|HBA_HUMAN", "Hemoglobin subunit alpha OS=Homo sapiens OX=9606 GN=HBA1 PE=1 SV=2",
                             "MVLS"),
               ProteinRecord("plain", "", "MK")]  # fmt: skip
    before = (
        "identifier,record_id,length,organism,taxon_id,gene_name,protein_name,database,accession,entry_name,"
        "protein_existence,start,end,family\n"
        "sp|P55685|Y4WG_RHISN,sp|P55685|Y4WG_RHISN,181,Rhizobium sp. (strain NGR234),,NGR_a00980,"
        "Uncharacterized protein y4wG,sp,P55685,Y4WG_RHISN,4,,,f\n"
        "sp|Q1XGE2|HAC1_ASPOR,sp|Q1XGE2|HAC1_ASPOR,345,Aspergillus oryzae,,hacA,Transcriptional activator hacA,sp,"
        "Q1XGE2,HAC1_ASPOR,2,,,f\n"
        "HBB_HUMAN,HBB_HUMAN,146,,,,Human beta hemoglobin.,,,,,,,f\n"
        "NP_000509.1,NP_000509.1,5,Homo sapiens,,,hemoglobin subunit beta,,,,,,,f\n"
        "UniRef50_P68871,UniRef50_P68871,4,Gnathostomata,7776,,Hemoglobin subunit beta,,,,,,,f\n"
        "HBB_HUMAN_3-147,HBB_HUMAN/3-147,3,,,,,,P68871,,,3,147,f\n"
        "sp|P69905|HBA_HUMAN,sp|P69905|HBA_HUMAN,4,Homo sapiens,9606,HBA1,Hemoglobin subunit alpha,sp,P69905,"
        "HBA_HUMAN,1,,,f\n"
        "plain,plain,2,,,,,,,,,,,\n"
    )
    assert protspace.metadata_csv(records, {"family": ["f"] * 7 + [None]}) == before


def test_the_protspace_table_gains_the_headers_own_columns(shared_fasta):
    """ProtSpace colours by any column after ``identifier``: ProteinGym's three are there, and a
    joined table's column of the same name wins."""
    records = read_fasta(shared_fasta / "proteingym_targets.fa").records[:2]
    rows = list(csv.DictReader(io.StringIO(protspace.metadata_csv(records, {"taxon": ["Flavivirus", None]}))))
    assert list(rows[0]) == ["identifier", "record_id", "length", "taxon", "selection", "assay"]
    assert [(r["identifier"], r["taxon"], r["selection"]) for r in rows] == [
        ("A0A140D2T1_ZIKV", "Flavivirus", "OrganismalFitness"), ("A0A192B1T2_9HIV1", "", "OrganismalFitness")]


def test_header_columns_are_capped_by_how_many_records_have_them():
    records = [ProteinRecord(f"r{i}", f"common=1 k{i}=x", "MK") for i in range(40)]
    columns = list(metadata_rows(records)[0])
    assert columns[:3] == ["id", "length", "common"] and len(columns) == 2 + MAX_HEADER_COLUMNS
    assert columns[3:5] == ["k0", "k1"]  # ties kept in the order they first appear


def test_taxon_ids_colour_as_names_and_other_numbers_as_numbers():
    rows = [{"taxon_id": 9606, "length": 3}, {"taxon_id": None, "length": 4}]
    assert colour_values(rows, "taxon_id") == ["9606", None] and colour_values(rows, "length") == [3, 4]


# The palette rule: CIEDE2000 (Sharma, Wu and Dalal 2005) between colours as seen in normal
# vision and through Machado, Oliveira and Fernandes' (2009) full-severity dichromacy matrices,
# applied in linear RGB.
DICHROMACY = {
    "normal": np.eye(3),
    "protanopia": np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
    "tritanopia": np.array([[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602],
                            [0.004733, 0.691367, 0.303900]]),
}  # fmt: skip
SRGB_TO_XYZ = np.array([[0.4124564, 0.3575761, 0.1804375], [0.2126729, 0.7151522, 0.0721750],
                        [0.0193339, 0.1191920, 0.9503041]])  # fmt: skip
D65 = np.array([0.95047, 1.0, 1.08883])


def _lab(colour: str, vision: str) -> np.ndarray:
    srgb = np.array([int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)])
    linear = np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)
    t = SRGB_TO_XYZ @ np.clip(DICHROMACY[vision] @ linear, 0, 1) / D65
    f = np.where(t > (6 / 29) ** 3, np.cbrt(t), t / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def _ciede2000(lab1, lab2) -> float:
    (l1, a1, b1), (l2, a2, b2) = lab1, lab2
    c_mean = (np.hypot(a1, b1) + np.hypot(a2, b2)) / 2
    g = 0.5 * (1 - np.sqrt(c_mean**7 / (c_mean**7 + 25**7)))
    c1, c2 = np.hypot((1 + g) * a1, b1), np.hypot((1 + g) * a2, b2)
    h1, h2 = (np.degrees(np.arctan2(b, (1 + g) * a)) % 360 for a, b in ((a1, b1), (a2, b2)))
    dh = 0.0 if c1 * c2 == 0 else (h2 - h1 + 180) % 360 - 180
    big_dh = 2 * np.sqrt(c1 * c2) * np.sin(np.radians(dh / 2))
    l_mean, c_mean2 = (l1 + l2) / 2, (c1 + c2) / 2
    h_mean = h1 + h2 if c1 * c2 == 0 else ((h1 + h2) / 2 + (180 if abs(h1 - h2) > 180 else 0)) % 360
    t = (1 - 0.17 * np.cos(np.radians(h_mean - 30)) + 0.24 * np.cos(np.radians(2 * h_mean))
         + 0.32 * np.cos(np.radians(3 * h_mean + 6)) - 0.20 * np.cos(np.radians(4 * h_mean - 63)))  # fmt: skip
    rotation = -np.sin(np.radians(60 * np.exp(-(((h_mean - 275) / 25) ** 2)))) * 2 * np.sqrt(
        c_mean2**7 / (c_mean2**7 + 25**7))
    sl = 1 + 0.015 * (l_mean - 50) ** 2 / np.sqrt(20 + (l_mean - 50) ** 2)
    sc, sh = 1 + 0.045 * c_mean2, 1 + 0.015 * c_mean2 * t
    terms = ((l2 - l1) / sl, (c2 - c1) / sc, big_dh / sh)
    return float(np.sqrt(sum(x**2 for x in terms) + rotation * terms[1] * terms[2]))


def _closest(colours, against=()) -> tuple[float, str, str, str]:
    """The closest two colours in any vision: (distance, colour, colour, vision)."""
    pairs = [(a, b) for i, a in enumerate(colours) for b in (*colours[i + 1 :], *against)]
    return min((_ciede2000(_lab(a, v), _lab(b, v)), a, b, v) for a, b in pairs for v in DICHROMACY)


@pytest.mark.parametrize(
    "lab1, lab2, expected",  # Sharma et al.'s test data, pairs 1, 7, 17 and 25
    [((50, 2.6772, -79.7751), (50, 0, -82.7485), 2.0425), ((50, 0, 0), (50, -1, 2), 2.3669),
     ((50, 2.5, 0), (73, 25, -18), 27.1492), ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644)],
)  # fmt: skip
def test_the_colour_distance_is_ciede2000(lab1, lab2, expected):
    assert _ciede2000(lab1, lab2) == pytest.approx(expected, abs=1e-4)


def test_the_category_palette_stays_apart_for_colour_blind_eyes():
    """Twelve colours at least 10 CIEDE2000 apart in every vision, and from white and "no value";
    the first eleven from "other" too (the twelfth is drawn only when there is no "other"). The
    palette the map had before fails: its first four (Human, Prokaryote, Eukaryote, Virus on the
    shared set) come within 6 of each other under deuteranopia."""
    palette = list(SAFE_CATEGORY_COLOURS)
    assert len(palette) == record_map.MAX_CATEGORIES == 12
    assert _closest(palette, ("#FFFFFF", MISSING_COLOUR))[0] >= 10
    assert _closest(palette[:11], ("#FFFFFF", MISSING_COLOUR, OTHER_COLOUR))[0] >= 10
    assert _closest(_qualitative(4))[0] < 6


def test_up_to_twelve_categories_get_a_colour_each_then_other():
    projection = record_map.project(RNG.normal(size=(26, 4)))
    ids = [f"r{i}" for i in range(26)]
    twelve = record_map.record_map_figure(projection, ids, [f"c{i % 12:02d}" for i in range(24)] + [None] * 2, "c")
    assert [t.marker.color for t in twelve.data] == [*SAFE_CATEGORY_COLOURS, MISSING_COLOUR]
    assert [t.name for t in twelve.data][:3] == ["c00", "c01", "c02"] and twelve.data[-1].name == "no value"
    thirteen = record_map.record_map_figure(projection, ids, [f"c{i % 13:02d}" for i in range(26)], "c")
    assert [t.marker.color for t in thirteen.data] == [*SAFE_CATEGORY_COLOURS[:11], OTHER_COLOUR]
    assert thirteen.data[-1].name == "other (2 values)" and len(thirteen.data[-1].x) == 4


def test_the_shared_set_coloured_by_taxon(shared_fasta):
    """Most frequent first, each taxon its own colour (Human and Virus were two purples)."""
    records = read_fasta(shared_fasta / "proteingym_targets.fa").records
    rows = metadata_rows(records)
    projection = record_map.project(RNG.normal(size=(len(rows), 4)))
    fig = record_map.record_map_figure(projection, [r["id"] for r in rows], colour_values(rows, "taxon"), "taxon")
    assert [(t.name, len(t.x)) for t in fig.data] == [("Human", 81), ("Prokaryote", 43), ("Eukaryote", 34),
                                                      ("Virus", 28)]  # fmt: skip
    assert [t.marker.color for t in fig.data] == list(SAFE_CATEGORY_COLOURS[:4])
    assert fig.layout.legend.title.text == "taxon"


def test_the_map_is_coloured_by_the_first_column_that_groups_the_records(shared_fasta):
    """Issue 50: the map of ProteinGym's 186 targets was coloured by nothing by default, though
    their headers carry taxon= (4 values over 186 records: it groups them; assay= is one per
    record and does not)."""
    targets = metadata_rows(read_fasta(shared_fasta / "proteingym_targets.fa").records)
    assert grouping_column(targets) == "taxon"
    uniprot = metadata_rows([ProteinRecord("sp|P69905|HBA_HUMAN", "Hemoglobin alpha OS=Homo sapiens OX=9606", "MVLS"),
                             ProteinRecord("sp|P68871|HBB_HUMAN", "Hemoglobin beta OS=Homo sapiens OX=9606", "MVHL"),
                             ProteinRecord("sp|P02088|HBB1_MOUSE", "Hemoglobin beta-1 OS=Mus musculus OX=10090", "MVHL")])
    assert grouping_column(uniprot) == "organism"  # not length, accession or protein name, which name each record
    plain = metadata_rows([ProteinRecord("a", "", "MKV"), ProteinRecord("b", "", "MKV")])
    assert grouping_column(plain) is None  # two records of one length: a length is not a group
    unique = metadata_rows([ProteinRecord("a", "host=human", "MK"), ProteinRecord("b", "host=mouse", "MKV")])
    assert grouping_column(unique) is None  # one record per value
    one = metadata_rows([ProteinRecord(f"sp|P0000{i}|X{i}_HUMAN", "OS=Homo sapiens", "MK") for i in range(3)])
    assert grouping_column(one) is None  # one value for all: no colours to tell apart (nor "sp" for all)
