"""The ESM-2 token alphabet (fair-esm's 33-token "ESM-1b" vocabulary), NumPy only."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

# Order matters: token ids are positions in this tuple and must match the
# embedding rows of the pretrained ESM-2 weights.
TOKENS: tuple[str, ...] = (
    "<cls>", "<pad>", "<eos>", "<unk>",
    *"LAGVSERTIDPKQNFYMHWCXBUZO.-",
    "<null_1>", "<mask>",
)

CLS_IDX = 0
PAD_IDX = 1
EOS_IDX = 2
UNK_IDX = 3
MASK_IDX = 32

TOKEN_TO_IDX: dict[str, int] = {token: idx for idx, token in enumerate(TOKENS)}

# The 25 residue letters ESM-2 has tokens for (20 standard + X B U Z O).
# Gap tokens '.' and '-' are deliberately left out: inputs are ungapped.
RESIDUE_LETTERS: str = "".join(t for t in TOKENS if len(t) == 1 and t.isalpha())
AA_TO_IDX: dict[str, int] = {letter: TOKEN_TO_IDX[letter] for letter in RESIDUE_LETTERS}

STANDARD_AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
STANDARD_AA_TOKEN_IDS: np.ndarray = np.array(
    [AA_TO_IDX[aa] for aa in STANDARD_AMINO_ACIDS], dtype=np.int32
)
STANDARD_AA_TOKEN_IDS.flags.writeable = False  # shared module constant

_SPECIAL_IDS = frozenset({CLS_IDX, PAD_IDX, EOS_IDX})


def encode(sequence: str) -> np.ndarray:
    """Token ids for `<cls>` + residues + `<eos>` (int32).

    Expects an already validated, uppercase sequence (see `fasta.py`);
    raises ValueError naming the first character without a residue token.
    """
    try:
        residues = [AA_TO_IDX[ch] for ch in sequence]
    except KeyError as exc:
        position = next(i for i, ch in enumerate(sequence, 1) if ch not in AA_TO_IDX)
        raise ValueError(
            f"position {position}: {exc.args[0]!r} is not an ESM-2 residue letter"
        ) from None
    return np.array([CLS_IDX, *residues, EOS_IDX], dtype=np.int32)


def decode(ids: Iterable[int]) -> str:
    """Sequence text for token ids, dropping `<cls>`, `<eos>` and `<pad>`.

    Other special tokens are written out in full (e.g. "<mask>") so nothing
    is silently lost; `decode(encode(s)) == s` for valid sequences.
    """
    out = []
    for idx in np.asarray(ids).ravel().tolist():
        if not 0 <= idx < len(TOKENS):
            raise ValueError(f"token id {idx} is outside the alphabet (0..{len(TOKENS) - 1})")
        if idx not in _SPECIAL_IDS:
            out.append(TOKENS[idx])
    return "".join(out)


def batch_encode(sequences: Sequence[str], pad_to: int | None = None) -> np.ndarray:
    """(B, T) int32 token ids, right-padded with PAD_IDX.

    T is the longest sequence + 2 (for `<cls>`/`<eos>`), or `pad_to` when given.
    """
    encoded = [encode(seq) for seq in sequences]
    needed = max((len(ids) for ids in encoded), default=2)
    width = needed if pad_to is None else pad_to
    if width < needed:
        raise ValueError(
            f"pad_to={pad_to} is too small: the longest sequence needs {needed} tokens"
        )
    batch = np.full((len(encoded), width), PAD_IDX, dtype=np.int32)
    for row, ids in zip(batch, encoded):
        row[: len(ids)] = ids
    return batch
