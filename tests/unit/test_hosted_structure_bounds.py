"""Issue #67's structure rows: an atom budget over every structure of one upload and of a session's
kept files, charged on the text before anything is parsed; chain counts (hosted: 200) and chain id
lengths bounded; mmCIF read as UTF-8; a visitor's text never an mmCIF data block name as it is."""

from __future__ import annotations

import types

import pytest

import hostile_files
from flamino_core.structure.files.reading import block_name, count_atom_lines, parse_structure_bytes
from flamino_core.structure.files.limits import StructureError


def _mmcif(chain_ids: list[str]) -> bytes:
    rows = [hostile_files._cif_row(n + 1, "CA", "GLY", chain, 1, (n * 4.0, 0.0, 0.0))
            for n, chain in enumerate(chain_ids)]
    return hostile_files._mmcif(rows).encode()


def test_an_mmcif_is_read_as_utf8_its_chain_ids_as_written():
    """A U+202E (right-to-left override) chain id, read as Latin-1, became three characters of mojibake."""
    parsed = parse_structure_bytes(_mmcif(["\u202eA", "B"]), "rtl.cif")
    assert [chain.id for chain in parsed.structure[0]] == ["\u202eA", "B"]
    latin = _mmcif(["B"]) + b"# caf\xe9\n"  # not UTF-8: read as Latin-1, as before
    assert [chain.id for chain in parse_structure_bytes(latin, "old.cif").structure[0]] == ["B"]


def test_a_chain_id_past_16_characters_is_refused_in_words():
    with pytest.raises(StructureError, match=r"long.cif has a chain id of 400 characters \('AAAAAAAA'…\); "
                                             r"chain ids of up to 16 are read"):
        parse_structure_bytes(_mmcif(["A" * 400]), "long.cif")
    assert [c.id for c in parse_structure_bytes(_mmcif(["A" * 16]), "ok.cif").structure[0]] == ["A" * 16]


def test_a_visitors_record_name_is_no_data_block_name():
    """The prediction's mmCIF download named its data block after the record: ``data_=HYPERLINK(...)<img``."""
    from flamino_core.structure.folding.prediction import prediction_mmcif

    hostile = '=HYPERLINK("http://x")<img src=x onerror=alert(1)> #'
    assert block_name(hostile) == "_HYPERLINK__http___x___img_src_x_onerror"
    assert block_name("") == block_name("<>") == "structure"
    pdb = ("ATOM      1  CA  GLY A   1       0.000   0.000   0.000  1.00 90.00           C\nEND\n")
    first = prediction_mmcif(pdb, hostile).splitlines()[0]
    assert first == "data_" + block_name(hostile)
    parsed = parse_structure_bytes(_mmcif(["A"]), hostile + ".cif")
    assert parsed.structure.id == block_name(hostile)


def test_a_hosted_server_reads_up_to_200_chains_a_model(monkeypatch):
    """999 chains of 60 atoms were accepted and listed (18.1 s, +170 MiB kept for the session)."""
    from app_pages._ui.server.policy import current_limits

    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    monkeypatch.delenv("FLAMINO_MAX_CHAINS", raising=False)
    limits = current_limits().structure_limits()
    assert limits["max_chains"] == 200
    with pytest.raises(StructureError, match="has 201 chains; this server reads structures of up to 200 chains"):
        parse_structure_bytes(_mmcif([f"C{n}" for n in range(201)]), "many.cif", **limits)


class _File:
    def __init__(self, name: str, data: bytes):
        self.name, self.data, self.size = name, data, len(data)

    def getvalue(self) -> bytes:
        return self.data


def test_an_upload_and_a_session_spend_one_atom_budget_before_any_parse(monkeypatch, tmp_path):
    """Three different ~3,000-atom files in one drop under a 5,000-atom budget: the first is read,
    the other two refused on their text, the reader never called for them; a later drop is charged
    the kept file's atoms too, until it is removed. 16 different 78,000-atom files in one drop were
    83.8 s of parsing."""
    from app_pages._ui.input import uploads

    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    monkeypatch.setenv("FLAMINO_MAX_UPLOAD_ATOMS", "5000")
    state: dict = {}
    monkeypatch.setattr(uploads, "st", types.SimpleNamespace(session_state=state))
    read = []

    def reader(name, data):
        read.append(name)
        return ">x\nG\n", "structure"

    files = []
    for index in range(3):
        path = hostile_files.large_mmcif(tmp_path, chains=2, residues=300 + index)  # 2 x 5 atoms a residue
        files.append(_File(f"s{index}.cif.gz", path.read_bytes()))
        assert count_atom_lines(files[-1].data) == 3_000 + 10 * index
    state["drop"] = files
    uploads._take("drop", reader)
    assert read == ["s0.cif.gz"]
    kept = {u.name: u for u in uploads.files()}
    assert kept["s0.cif.gz"].atoms == 3_000 and kept["s0.cif.gz"].problem is None
    for name in ("s1.cif.gz", "s2.cif.gz"):
        assert kept[name].data == b"" and kept[name].problem.startswith(
            f"not read: its {count_atom_lines(files[int(name[1])].data):,} atoms and the 3,000 of the structures "
            "uploaded before it pass the 5,000 atoms")
    state["again"] = [files[1]]  # the session still holds s0: refused again
    uploads._take("again", reader)
    assert read == ["s0.cif.gz"]
    uploads.remove("s0.cif.gz")
    state["after"] = [files[1]]
    uploads._take("after", reader)
    assert read == ["s0.cif.gz", "s1.cif.gz"]
    assert {u.name: u.atoms for u in uploads.files()}["s1.cif.gz"] == 3_010
