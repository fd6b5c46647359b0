"""Reading real structures, choosing the chain, aligning it to the sequence (structure.py, structure_align.py).

Every structure here is one of the five real files in ../shared/structures (see its SOURCES.md).
Two tests assemble a file from real records of those files (two models; a chain holding only
ligands and water) because none of the five shows that case; they say so.
"""

from __future__ import annotations

import gzip
import io

import numpy as np
import pytest
from Bio.PDB import PDBIO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structure_reference import STANDARD, STRUCTURES, entity_sequences, read_reference, seqres

from flamino_core.structure.files.amino_acids import AMINO_ACID_LETTERS
from flamino_core.structure.contact_atoms import CB, GLY_CA, VIRTUAL_CB
from flamino_core.structure.files.reading import (
    StructureError,
    chain_residues,
    parse_structure_bytes,
    protein_chains,
    read_structure,
)
from flamino_core.structure.align import align_chain, choose_chain, identity_needed

pytestmark = pytest.mark.skipif(not STRUCTURES.is_dir(), reason=f"real structures not found at {STRUCTURES}")
ABETA42 = "".join(STANDARD[name] for name in seqres(STRUCTURES / "2BEG.pdb", "A")) if STRUCTURES.is_dir() else ""


def _standard_residues(path, chain):
    """The chain's standard amino acids by the independent reader (no water, ions, ligands)."""
    return [r for r in read_reference(path, chain) if r.name in STANDARD and "CA" in r.atoms]


# --- reading -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, chain",
    [("1A7G.cif", "E"), ("1GBT.cif", "A"), ("4ZHL.cif", "U"), ("4ZHL.cif", "P"), ("2BEG.pdb", "C")],
)
def test_chain_residues_match_an_independent_reader(name, chain):
    """Same residues in the same order, same labels, same C-alpha and C-beta (CA for glycine)."""
    reference = _standard_residues(STRUCTURES / name, chain)
    residues = chain_residues(read_structure(STRUCTURES / name), chain)
    assert residues.labels == [r.label for r in reference]
    assert residues.sequence == "".join(STANDARD[r.name] for r in reference)
    np.testing.assert_allclose(residues.ca, [r.atoms["CA"] for r in reference], atol=1e-3)  # 3 decimals in the files
    expected = [r.atoms["CA"] if r.name == "GLY" else r.atoms["CB"] for r in reference]
    np.testing.assert_allclose(residues.contact_xyz, expected, atol=1e-3)
    assert set(residues.contact_atom) == {CB, GLY_CA}


def test_observed_sequences_equal_the_deposited_ones():
    """1A7G, 1GBT and 4ZHL have no unobserved residues: the chains read give the entity sequences."""
    for name, chains in (("1A7G.cif", "E"), ("1GBT.cif", "A"), ("4ZHL.cif", "UP")):
        parsed = read_structure(STRUCTURES / name)
        read = [chain_residues(parsed, c).sequence for c in chains]
        assert read == entity_sequences(STRUCTURES / name)


def test_ions_ligands_and_water_are_not_residues():
    """1GBT's calcium ion is a residue named CA with an atom named CA: not an amino acid.

    (SOURCES.md counts 224 residues with a C-alpha, the ion included; the chain has 223.)"""
    parsed = read_structure(STRUCTURES / "1GBT.cif")
    (summary,) = parsed.chains()
    assert summary.n_amino_acids == 223
    assert summary.others == {"CA": 1, "SO4": 2, "GBS": 1, "HOH": 117}
    assert "CA" not in chain_residues(parsed, "A").names
    assert read_structure(STRUCTURES / "1A7G.cif").chains()[0].others == {"SO4": 2, "HOH": 74}


def test_numbering_gaps_and_insertion_codes_are_labels_not_positions():
    """1GBT uses chymotrypsin numbering (gaps, 184A ...); 4ZHL has 37A-37D; 2N0N numbers residue 10 as 9A."""
    gbt = chain_residues(read_structure(STRUCTURES / "1GBT.cif"), "A")
    labels = gbt.labels
    assert labels[0] == "16" and "184A" in labels and "35" not in labels  # 34 -> 37 gap
    zhl = chain_residues(read_structure(STRUCTURES / "4ZHL.cif"), "U").labels
    assert zhl[zhl.index("37") : zhl.index("37") + 6] == ["37", "37A", "37B", "37C", "37D", "38"]
    assert chain_residues(read_structure(STRUCTURES / "2n0n_M1.pdb"), "A").labels[8:] == ["9", "9A", "11"]


def test_modified_and_unknown_amino_acids_in_2n0n():
    """AIB (MODRES: modified ALA) is read as A; PH8 (5-phenyl-norvaline), which Biopython's table
    lacks but which has a backbone, as X; the NH2 cap is not an amino acid. AIB has no CB atom
    (its beta carbons are CB1/CB2), so its C-beta is placed from N, CA, C: the placed atom must
    fall on one of the two real beta carbons."""
    parsed = read_structure(STRUCTURES / "2n0n_M1.pdb")
    residues = chain_residues(parsed, "A")
    seqres_names = seqres(STRUCTURES / "2n0n_M1.pdb", "A")
    assert seqres_names[-1] == "NH2" and residues.names == tuple(seqres_names[:-1])
    assert residues.sequence == "HAEGKFTSEFX"
    assert parsed.chains()[0].others == {"NH2": 1}
    assert any("AIB as A" in note for note in residues.notes) and any("PH8" in note for note in residues.notes)
    aib = residues.names.index("AIB")
    assert residues.contact_atom[aib] == VIRTUAL_CB
    reference = {r.label: r for r in read_reference(STRUCTURES / "2n0n_M1.pdb", "A")}["2"]
    nearest = min(np.linalg.norm(residues.contact_xyz[aib] - reference.atoms[b]) for b in ("CB1", "CB2"))
    assert nearest < 0.3  # ideal-geometry placement vs a real methyl: ~0.1-0.2 A


def test_virtual_cb_matches_real_cb_atoms():
    """The ideal-geometry C-beta used for residues without one, checked on every real CB of 1GBT."""
    from flamino_core.structure.contact_atoms import virtual_cb

    reference = [r for r in _standard_residues(STRUCTURES / "1GBT.cif", "A") if "CB" in r.atoms]
    n, ca, c, cb = (np.array([r.atoms[a] for r in reference]) for a in ("N", "CA", "C", "CB"))
    deviation = np.linalg.norm(virtual_cb(n, ca, c) - cb, axis=1)
    # Real side chains deviate from ideal geometry by ~0.1-0.2 A (mean 0.17 measured); a wrong
    # sign in the angle or dihedral puts the atom ~2.5 A away.
    assert deviation.mean() < 0.25 and deviation.max() < 0.7


def test_modified_residue_table():
    """MSE (selenomethionine) as M and SEP as S from Biopython's PDB table; SEC/PYL (ESM-2 has
    tokens for them) as U/O. No real file here has these residues (see docs/structure.md)."""
    assert AMINO_ACID_LETTERS["MSE"] == "M" and AMINO_ACID_LETTERS["SEP"] == "S"
    assert AMINO_ACID_LETTERS["SEC"] == "U" and AMINO_ACID_LETTERS["PYL"] == "O"
    assert "HOH" not in AMINO_ACID_LETTERS and "DA" not in AMINO_ACID_LETTERS


def test_gzip_and_bytes_read_like_the_file():
    path = STRUCTURES / "1A7G.cif"
    plain = chain_residues(read_structure(path), "E")
    zipped = chain_residues(parse_structure_bytes(gzip.compress(path.read_bytes()), "1A7G.cif.gz"), "E")
    assert zipped.labels == plain.labels and np.array_equal(zipped.ca, plain.ca)


# --- models and chains ---------------------------------------------------------------------------
def test_several_models_choose_by_index(tmp_path):
    """Assembled, since none of the five files has two models: 2BEG's chain A as MODEL 1 and its
    chain B, relabelled A, as MODEL 2 (real coordinates, arrangement made up for the test)."""
    lines = (STRUCTURES / "2BEG.pdb").read_text().splitlines()
    atoms = {c: [l for l in lines if l.startswith("ATOM") and l[21] == c] for c in "AB"}
    text = "\n".join(
        ["MODEL        1", *atoms["A"], "ENDMDL", "MODEL        2"]
        + [l[:21] + "A" + l[22:] for l in atoms["B"]]
        + ["ENDMDL", "END"]
    )
    parsed = parse_structure_bytes(text.encode(), "two-models.pdb")
    assert parsed.n_models == 2
    second = chain_residues(parsed, "A", model_index=1)
    reference_b = _standard_residues(STRUCTURES / "2BEG.pdb", "B")
    np.testing.assert_allclose(second.ca, [r.atoms["CA"] for r in reference_b], atol=1e-3)
    assert choose_chain(parsed, ABETA42, model_index=1).chain.model_index == 1
    with pytest.raises(StructureError, match="2 model.*no model 2"):
        chain_residues(parsed, "A", model_index=2)


def test_chain_without_amino_acids(tmp_path):
    """Assembled: 1GBT's ions, sulfates, ligand and water moved into a chain B of their own (real
    records; no file here has a non-protein chain)."""
    from Bio.PDB.Chain import Chain

    structure = read_structure(STRUCTURES / "1GBT.cif").structure
    model = structure[0]
    ligands = Chain("B")
    for residue in [r for r in model["A"] if r.id[0] != " "]:
        model["A"].detach_child(residue.id)
        ligands.add(residue)
    model.add(ligands)
    out = io.StringIO()
    writer = PDBIO()
    writer.set_structure(structure)
    writer.save(out)
    parsed = parse_structure_bytes(out.getvalue().encode(), "1GBT-split.pdb")
    summaries = {s.chain_id: s for s in parsed.chains()}
    assert not summaries["B"].is_protein and summaries["B"].others["HOH"] == 117
    assert [c.chain_id for c in protein_chains(parsed)] == ["A"]
    with pytest.raises(StructureError, match="chain B.*not a protein chain"):
        chain_residues(parsed, "B")
    assert choose_chain(parsed, entity_sequences(STRUCTURES / "1GBT.cif")[0]).chain_id == "A"


def test_chain_choice_picks_the_matching_chain():
    parsed = read_structure(STRUCTURES / "4ZHL.cif")
    protein, peptide = entity_sequences(STRUCTURES / "4ZHL.cif")
    assert choose_chain(parsed, protein).chain_id == "U"
    assert choose_chain(parsed, peptide).chain_id == "P"
    # Five identical chains: the first in the file.
    assert choose_chain(read_structure(STRUCTURES / "2BEG.pdb"), ABETA42).chain_id == "A"
    assert choose_chain(read_structure(STRUCTURES / "2BEG.pdb"), ABETA42, chain_id="D").chain_id == "D"


def test_missing_chain_lists_the_chains():
    with pytest.raises(StructureError, match=r"no chain 'Z'.*chain U: 247 amino acids.*chain P: 10"):
        choose_chain(read_structure(STRUCTURES / "4ZHL.cif"), "ACDEFGHIKL", chain_id="Z")


def test_poor_alignment_is_refused_with_the_identity():
    """Aβ42 against the unrelated 1A7G finds ~35% identity over ~40 residues with free end gaps:
    below the twilight-zone curve for that length, so refused, and the message gives the identity."""
    with pytest.raises(StructureError, match=r"identity \d+\.\d% over \d+ aligned residues"):
        choose_chain(read_structure(STRUCTURES / "1A7G.cif"), ABETA42)
    # The peptide chain P of 4ZHL forced onto the protein's sequence: refused too.
    protein, _ = entity_sequences(STRUCTURES / "4ZHL.cif")
    with pytest.raises(StructureError, match="chain P does not match"):
        choose_chain(read_structure(STRUCTURES / "4ZHL.cif"), protein, chain_id="P")


def test_homologue_passes_the_identity_curve():
    """1GBT (trypsin) and 4ZHL chain U (a trypsin-like protease): ~40% identity over ~220
    residues, well above the curve (~21%), so a homologue's structure can be compared."""
    alignment = choose_chain(read_structure(STRUCTURES / "4ZHL.cif"), entity_sequences(STRUCTURES / "1GBT.cif")[0])
    assert alignment.chain_id == "U" and 0.3 < alignment.identity < 0.6
    assert alignment.identity > identity_needed(alignment.n_aligned)


def test_identity_curve_values():
    """Rost's curve at a few lengths, computed by hand from 480 * n^(-0.32 (1 + e^(-n/1000)))."""
    for n, percent in ((100, 28.9), (250, 20.7)):
        assert identity_needed(n) == pytest.approx(percent / 100, abs=0.002)
    assert identity_needed(10) == 0.9  # the curve exceeds 100% there: capped
    assert identity_needed(0) == float("inf")


# --- alignment -----------------------------------------------------------------------------------
def test_partial_structure_aligns_by_sequence_not_numbers():
    """2BEG covers residues 17-42 of Aβ(1-42) (REMARK 465 lists 1-16 as missing): positions 16..41
    map to the chain's 26 residues, coverage 26/42, identity 1."""
    alignment = align_chain(ABETA42, chain_residues(read_structure(STRUCTURES / "2BEG.pdb"), "A"))
    assert (alignment.residue_at[:16] == -1).all()
    assert list(alignment.residue_at[16:]) == list(range(26))
    assert alignment.identity == 1.0 and alignment.coverage == pytest.approx(26 / 42)
    # Residue number n of this file is Aβ position n: the alignment found that on its own.
    labels = alignment.chain.labels
    assert all(int(labels[alignment.residue_at[p]]) == p + 1 for p in range(16, 42))


def test_sequence_longer_than_the_structure_on_both_sides_and_inside():
    """1GBT's own sequence with 5 residues added at the N terminus, 7 inside a loop (like
    residues missing from the model) and 4 at the C terminus: every original residue still
    aligns to its own position, the added positions to nothing."""
    residues = chain_residues(read_structure(STRUCTURES / "1GBT.cif"), "A")
    own = residues.sequence
    cut = 100
    extended = "MKWVT" + own[:cut] + "GSGSGSG" + own[cut:] + "HHHH"
    alignment = align_chain(extended, residues)
    expected = np.full(len(extended), -1)
    expected[5 : 5 + cut] = np.arange(cut)
    expected[5 + cut + 7 : 5 + len(own) + 7] = np.arange(cut, len(own))
    assert np.array_equal(alignment.residue_at, expected)
    assert alignment.n_aligned == len(own) and alignment.identity == 1.0
    assert alignment.coverage == pytest.approx(len(own) / len(extended))


def test_point_mutants_align_with_identity_below_one():
    residues = chain_residues(read_structure(STRUCTURES / "1A7G.cif"), "E")
    mutated = list(residues.sequence)
    for p in (10, 40, 70):
        mutated[p] = "W" if mutated[p] != "W" else "A"
    alignment = align_chain("".join(mutated), residues)
    assert list(alignment.residue_at) == list(range(len(mutated)))
    assert alignment.identity == pytest.approx(1 - 3 / len(mutated))


def test_per_position_and_per_residue_are_inverse_on_aligned_pairs():
    alignment = align_chain(ABETA42, chain_residues(read_structure(STRUCTURES / "2BEG.pdb"), "B"))
    values = np.arange(42, dtype=float)
    back = alignment.per_position(alignment.per_residue(values))
    assert np.array_equal(back[16:], values[16:]) and np.isnan(back[:16]).all()


def test_selenocysteine_and_pyrrolysine_in_the_sequence_align():
    """BLOSUM62 has no U or O: they are scored as X, so a sequence carrying them still aligns."""
    residues = chain_residues(read_structure(STRUCTURES / "1A7G.cif"), "E")
    seq = residues.sequence[:30] + "U" + residues.sequence[31:60] + "O" + residues.sequence[61:]
    alignment = align_chain(seq, residues)
    assert list(alignment.residue_at) == list(range(len(seq)))


# --- not a structure -----------------------------------------------------------------------------
def test_files_that_are_not_structures(shared_fasta):
    fasta = next(iter(sorted(shared_fasta.glob("*.fa")))).read_bytes()
    cases = {
        "a FASTA file": fasta,
        "empty": b"",
        "binary": bytes(range(256)) * 4,
        "plain text": b"Dear reviewer,\nplease find attached\n",
        "mmCIF without atoms": b"data_x\n_cell.length_a 10.0\n_cell.length_b 12.0\n",
    }
    for expected, data in cases.items():
        with pytest.raises(StructureError) as err:
            parse_structure_bytes(data, "upload")
        assert "upload" in str(err.value), expected
    with pytest.raises(StructureError, match="FASTA"):
        parse_structure_bytes(fasta, "seqs.fa")
    with pytest.raises(StructureError, match="gzip"):
        parse_structure_bytes(gzip.compress((STRUCTURES / "1A7G.cif").read_bytes())[:500], "1A7G.cif.gz")
    with pytest.raises(StructureError, match="cannot read"):
        read_structure(STRUCTURES / "no-such-file.pdb")


def test_damaged_coordinates_are_reported():
    text = (STRUCTURES / "2BEG.pdb").read_text().splitlines()
    first_atom = next(k for k, line in enumerate(text) if line.startswith("ATOM"))
    text[first_atom] = text[first_atom][:30] + "   x.xxx" + text[first_atom][38:]
    with pytest.raises(StructureError, match="could not be read"):
        parse_structure_bytes("\n".join(text).encode(), "2BEG-damaged.pdb")


def test_size_limit():
    with pytest.raises(StructureError, match="limit"):
        parse_structure_bytes((STRUCTURES / "1A7G.cif").read_bytes(), "1A7G.cif", max_bytes=10_000)
    with pytest.raises(StructureError, match="decompresses to more than"):
        parse_structure_bytes(gzip.compress((STRUCTURES / "1A7G.cif").read_bytes()), "x.gz", max_bytes=10_000)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(["1A7G.cif", "2BEG.pdb", "2n0n_M1.pdb"]),
    cut=st.floats(0.0, 1.0),
    flips=st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(0, 255)), max_size=20),
    zipped=st.booleans(),
)
def test_damaged_real_files_never_raise_anything_else(name, cut, flips, zipped):
    """Truncated and byte-flipped real files: a structure or a StructureError, never a traceback."""
    data = bytearray((STRUCTURES / name).read_bytes())
    data = data[: int(len(data) * cut)]
    for where, byte in flips:
        if data:
            data[int(where * (len(data) - 1))] = byte
    payload = gzip.compress(bytes(data)) if zipped else bytes(data)
    try:
        parsed = parse_structure_bytes(payload, name)
    except StructureError:
        return
    for chain in protein_chains(parsed):
        assert len(chain.sequence) == len(chain.ca) == len(chain.contact_xyz)
        assert np.isfinite(chain.ca).all() and np.isfinite(chain.contact_xyz).all()


# --- a structure as input: its protein chains as records (issue #37, item 4) ------------------------------
def test_each_protein_chain_is_a_record_numbered_from_the_file_and_read_back_by_the_fasta_validator():
    """1GBT (one protein chain, chymotrypsin numbering 16-245 with insertion codes) and 4ZHL (two):
    each protein chain's record holds the amino acids the independent reader finds in the file's
    ``_atom_site`` table (standard residues, in file order), its id carries the file's first and
    last residue numbers, and the FASTA written for the Input page reads back to the same records."""
    from flamino_core.inputs.fasta import parse_fasta_text
    from flamino_core.structure.files.chain_records import chain_records, records_fasta

    for name, chains in (("1GBT.cif", ("A",)), ("4ZHL.cif", ("U", "P"))):
        path = STRUCTURES / name
        if not path.exists():
            pytest.skip(f"real structure not found at {path}")
        records = chain_records(read_structure(path))
        assert tuple(c.chain_id for c in records) == chains
        for chain in records:
            reference = [r for r in read_reference(path, chain.chain_id) if not r.hetero and r.name != "HOH"]
            assert chain.record.sequence == "".join(STANDARD[r.name] for r in reference)
            first, last = reference[0].label, reference[-1].label
            assert chain.record.id == f"{name.split('.')[0]}_{chain.chain_id}/{first}-{last}"
            assert f"chain={chain.chain_id}" in chain.record.description
        parsed = parse_fasta_text(records_fasta(records))
        assert not parsed.errors and not parsed.warnings
        assert parsed.records == tuple(c.record for c in records)
    # 1GBT's numbering skips numbers and carries insertion codes (184A ...): said, not hidden.
    (trypsin,) = chain_records(read_structure(STRUCTURES / "1GBT.cif"))
    assert not trypsin.contiguous and "insertion codes" in trypsin.describe()


def test_a_structure_is_told_from_fasta_by_its_first_line_plain_or_gzipped():
    from flamino_core.structure.files.chain_records import looks_like_structure

    for name in ("1GBT.cif", "2BEG.pdb"):
        data = (STRUCTURES / name).read_bytes()
        assert looks_like_structure(data) and looks_like_structure(gzip.compress(data))
    assert not looks_like_structure(b">ATOM of a protein\nMKV\n")  # a FASTA header is never a structure
    assert not looks_like_structure(gzip.compress(b">x\nMKV\n"))
    assert not looks_like_structure(b"\x1f\x8bnot gzip at all")
