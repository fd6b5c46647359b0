"""``numbering.Numbering``: residue number <-> 0-based index, on hand-checked real cases."""

import numpy as np

from flamino_core.inputs.numbering import Numbering, first_number
from flamino_core.variants.notation import parse_variant

# 1GBT chain A (bovine beta-trypsin, /work/shared/structures/1GBT.cif), as in
# /work/runs/snap/1gbt.fa: its 223 residues run I16 ... N245 in the file's chymotrypsinogen
# numbering (gaps at 35-36, 67-68, 126, 131, 205-208, 218; insertion codes 65A, 184A, 188A, 221A),
# checked by reading the file with Biopython.
GBT_A = ("IVGGYTCGANTVPYQVSLNSGYHFCGGSLINSQWVVSAAHCYKSGIQVRLGEDNINVVEGNEQFISASKSIVHPSYNSNTLNNDIMLIKLKSAA"
         "SLNSRVASISLPTSCASAGTQCLISGWGNTKSSGTSYPDVLKCLKAPILSDSSCKSAYPGQITSNMFCAGYLEGGKDSCQGDSGGPVVCSGKL"
         "QGIVSWGSGCAQKNKPGVYTKVCNYVSWIKQTIASN")
# Human beta-globin with its initiator Met (UniProt P68871): HGVS numbers E7 (p.Glu7Val, sickle
# cell), the haemoglobin literature numbers the mature chain from V1, so the same residue is E6.
HBB = "MVHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTPDAVMGNPKVKAHGKKVLGAFSDGLAHLDNLKGTFATLSELHCDKLHVDPENFRLLGNVLVCVLAHHFGKEFTPPVQAAYQKVVAGVANALAHKYH"


def test_a_uniprot_header_numbers_from_its_start():
    # A /16-245 header: numbering starts at 16, but 1GBT's chain has 223 residues, not the
    # 230 the span says (its gaps and insertion codes), so the reader notes it and numbers on.
    first, note = first_number("1gbt_A/16-245", len(GBT_A))
    assert len(GBT_A) == 223 and first == 16 and "16-245 (230)" in note and "223" in note
    numbering = Numbering(first)
    assert GBT_A[numbering.index(16)] == "I" and numbering.number(0) == 16  # I16, the chain's first
    assert numbering.last(len(GBT_A)) == 238  # sequential numbers end at 238, not the file's N245
    assert GBT_A[numbering.index(238)] == "N" and numbering.index_within(239, len(GBT_A)) is None
    assert numbering.index_within(15, len(GBT_A)) is None and numbering.index_within(16, len(GBT_A)) == 0
    assert numbering.span(len(GBT_A)) == "16-238"
    assert numbering.span_note(len(GBT_A)) == "16-238, numbering starts at 16"
    assert list(numbering.numbers(3)) == [16, 17, 18]


def test_the_same_residue_in_two_numberings():
    hgvs, mature = Numbering(1), Numbering(0)
    assert HBB[hgvs.index(7)] == HBB[mature.index(6)] == "E"  # the sickle-cell glutamate
    assert hgvs.span_note(len(HBB)) == "1-147" and mature.span_note(len(HBB)) == "0-146, numbering starts at 0"
    # What parse_variant reads through it: E7V from 1, E6V from 0, the same substitution.
    assert parse_variant("E7V", HBB, hgvs).substitutions == parse_variant("E6V", HBB, mature).substitutions
    assert "(0-146, numbering starts at 0)" in parse_variant("E147V", HBB, mature).message


def test_arrays_keep_their_type_and_thousands_are_grouped():
    numbering = Numbering(73)  # SECY_CHLTR/73-433, the Pfam example the docs quote
    assert first_number("SECY_CHLTR/73-433", 361) == (73, "")
    indices = np.arange(3)
    numbers = numbering.number(indices)
    assert numbers.dtype == indices.dtype and numbers.tolist() == [73, 74, 75]
    assert numbering.index(numbers).tolist() == [0, 1, 2]
    assert Numbering(1).span(1_500) == "1-1,500" and Numbering().first == 1
