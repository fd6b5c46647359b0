"""The alphabet must match fair-esm's ESM-2 vocabulary token for token."""

import numpy as np
import pytest

from flamino_core.alphabet import (
    AA_TO_IDX,
    CLS_IDX,
    EOS_IDX,
    MASK_IDX,
    PAD_IDX,
    STANDARD_AA_TOKEN_IDS,
    STANDARD_AMINO_ACIDS,
    TOKENS,
    UNK_IDX,
    batch_encode,
    decode,
    encode,
)

# Written out independently from fair-esm's esm/constants.py + Alphabet("ESM-1b").
FAIR_ESM_TOKENS = [
    "<cls>", "<pad>", "<eos>", "<unk>",
    "L", "A", "G", "V", "S", "E", "R", "T", "I", "D", "P", "K", "Q", "N",
    "F", "Y", "M", "H", "W", "C", "X", "B", "U", "Z", "O", ".", "-",
    "<null_1>", "<mask>",
]  # fmt: skip

HBB = (
    "VHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTPDAVMGNPKV"
    "KAHGKKVLGAFSDGLAHLDNLKGTFATLSELHCDKLHVDPENFRLLGNVLVCVLAHHFGK"
    "EFTPPVQAAYQKVVAGVANALAHKYH"
)


def test_tokens_match_fair_esm_order():
    assert list(TOKENS) == FAIR_ESM_TOKENS
    assert len(TOKENS) == 33


def test_special_indices():
    assert (CLS_IDX, PAD_IDX, EOS_IDX, UNK_IDX, MASK_IDX) == (0, 1, 2, 3, 32)
    assert TOKENS[CLS_IDX] == "<cls>"
    assert TOKENS[PAD_IDX] == "<pad>"
    assert TOKENS[EOS_IDX] == "<eos>"
    assert TOKENS[UNK_IDX] == "<unk>"
    assert TOKENS[MASK_IDX] == "<mask>"


def test_residue_letters():
    assert sorted(AA_TO_IDX) == sorted("LAGVSERTIDPKQNFYMHWCXBUZO")
    assert "J" not in AA_TO_IDX
    for letter, idx in AA_TO_IDX.items():
        assert FAIR_ESM_TOKENS[idx] == letter


def test_standard_amino_acids():
    assert STANDARD_AMINO_ACIDS == "ACDEFGHIKLMNPQRSTVWY"
    assert "".join(sorted(STANDARD_AMINO_ACIDS)) == STANDARD_AMINO_ACIDS
    assert len(set(STANDARD_AMINO_ACIDS)) == 20
    assert STANDARD_AA_TOKEN_IDS.dtype == np.int32
    assert [FAIR_ESM_TOKENS[i] for i in STANDARD_AA_TOKEN_IDS] == list(STANDARD_AMINO_ACIDS)
    assert STANDARD_AA_TOKEN_IDS.tolist() == [5, 23, 13, 9, 18, 6, 21, 12, 15, 4,
                                              20, 17, 14, 16, 10, 8, 11, 7, 22, 19]  # fmt: skip


def test_standard_ids_are_read_only():
    with pytest.raises(ValueError):
        STANDARD_AA_TOKEN_IDS[0] = 0


def test_encode_adds_cls_and_eos():
    ids = encode("MKV")
    assert ids.dtype == np.int32
    assert ids.tolist() == [0, 20, 15, 7, 2]


def test_encode_empty_sequence():
    assert encode("").tolist() == [CLS_IDX, EOS_IDX]


@pytest.mark.parametrize("bad, position", [("MKJ", 3), ("mkv", 1), ("M-K", 2), ("M K", 2)])
def test_encode_rejects_unknown_characters(bad, position):
    with pytest.raises(ValueError, match=f"position {position}"):
        encode(bad)


def test_decode_round_trip():
    assert decode(encode(HBB)) == HBB
    assert decode(np.array([CLS_IDX, 20, MASK_IDX, 15, EOS_IDX, PAD_IDX])) == "M<mask>K"


def test_decode_rejects_out_of_range_ids():
    with pytest.raises(ValueError):
        decode([0, 33])
    with pytest.raises(ValueError):
        decode([-1])


def test_batch_encode_pads_to_longest():
    batch = batch_encode(["MKV", "M", ""])
    assert batch.dtype == np.int32
    assert batch.tolist() == [
        [0, 20, 15, 7, 2],
        [0, 20, 2, 1, 1],
        [0, 2, 1, 1, 1],
    ]


def test_batch_encode_pad_to():
    batch = batch_encode(["MK"], pad_to=8)
    assert batch.shape == (1, 8)
    assert batch[0].tolist() == [0, 20, 15, 2, 1, 1, 1, 1]
    assert batch_encode(["MK"], pad_to=4).shape == (1, 4)  # exactly enough
    with pytest.raises(ValueError, match="too small"):
        batch_encode(["MK"], pad_to=3)


def test_batch_encode_empty_batch():
    assert batch_encode([]).shape == (0, 2)
    assert batch_encode([], pad_to=10).shape == (0, 10)


def _fair_esm_alphabet():
    esm = pytest.importorskip("esm")
    data = pytest.importorskip("esm.data")
    if not hasattr(data, "Alphabet"):
        pytest.skip(f"{esm.__name__} is not fair-esm")
    return data.Alphabet.from_architecture("ESM-1b")


def test_matches_installed_fair_esm_alphabet():
    ref = _fair_esm_alphabet()
    assert list(TOKENS) == list(ref.all_toks)
    assert (CLS_IDX, PAD_IDX, EOS_IDX, UNK_IDX, MASK_IDX) == (
        ref.cls_idx, ref.padding_idx, ref.eos_idx, ref.unk_idx, ref.mask_idx,
    )  # fmt: skip
    for letter, idx in AA_TO_IDX.items():
        assert ref.get_idx(letter) == idx


def test_matches_fair_esm_batch_converter():
    ref = _fair_esm_alphabet()
    sequences = [HBB, "MKTAYIAKQRQISFVKSHFSRQ", "M", "XBUZO"]
    _, _, tokens = ref.get_batch_converter()([(str(i), s) for i, s in enumerate(sequences)])
    np.testing.assert_array_equal(batch_encode(sequences), tokens.numpy())
