"""SaProt's structure-aware vocabulary (Su et al., ICLR 2024): each residue one token that pairs
its amino acid with the Foldseek 3Di letter of its structure, ``#`` where the structure is
unknown or unreliable. NumPy only: the network is ESM-2's (``esm2.ESM2``), the tokens are these.

The 446 tokens, in the order of the published ``vocab.txt`` (``saprot_vocab.txt`` beside this
module): five specials (``<cls> <pad> <eos> <unk> <mask>``), then every amino acid of
``ACDEFGHIKLMNPQRSTVWY#`` with every 3Di letter of ``pynwrqhgdlvtmfsaeikc#``, the amino acid
outer (SaProt ``utils/constants.py`` ``foldseek_seq_vocab`` and ``foldseek_struc_vocab``;
ProteinGym's ``baselines/saprot/compute_fitness.py`` relies on this order when it sums the 21
tokens of one amino acid as ``probs[ori_st: ori_st + 21]``). Combined tokens are written amino
acid upper case, 3Di lower case: ``Md``, ``Ev``, ``#p`` (the amino acid masked, its structure kept).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY#"  # SaProt's residue letters; "#": the amino acid masked
STRUCTURE_LETTERS = "pynwrqhgdlvtmfsaeikc#"  # Foldseek's 20 3Di states (lower case); "#": no structure
UNKNOWN = "#"
SPECIALS = ("<cls>", "<pad>", "<eos>", "<unk>", "<mask>")
TOKENS: tuple[str, ...] = SPECIALS + tuple(a + s for a, s in itertools.product(AMINO_ACIDS, STRUCTURE_LETTERS))
TOKEN_TO_IDX = {token: idx for idx, token in enumerate(TOKENS)}
CLS_IDX, PAD_IDX, EOS_IDX, UNK_IDX, MASK_IDX = range(5)  # <pad>, <cls>, <eos> where ESM-2 has them
VOCAB_FILE = Path(__file__).with_name("saprot_vocab.txt")  # as published with the Hub folders


def published_vocabulary() -> tuple[str, ...]:
    """The tokens of the vocabulary file flamino ships (equal to ``TOKENS``: tests/parity/test_saprot.py)."""
    return tuple(VOCAB_FILE.read_text().split())


def combined(sequence: str, structure: str) -> str:
    """SaProt's input text: each residue's amino acid then its 3Di letter (``MdEvVp``)."""
    if len(sequence) != len(structure):
        raise ValueError(f"{len(structure)} structure letters for {len(sequence)} residues")
    return "".join(a + s for a, s in zip(sequence, structure.lower()))


def encode(sequence: str, structure: str | None = None) -> np.ndarray:
    """Token ids of ``<cls>`` + one combined token per residue + ``<eos>`` (int32).

    ``structure``: one 3Di letter per residue (``#`` for none); None: every residue ``#``. A residue
    letter SaProt has no token for (X, B, U, Z, O) becomes ``<unk>``, as SaProt's tokenizer does.
    """
    structure = UNKNOWN * len(sequence) if structure is None else structure.lower()
    if len(structure) != len(sequence):
        raise ValueError(f"{len(structure)} structure letters for {len(sequence)} residues")
    bad = next((s for s in structure if s not in STRUCTURE_LETTERS), None)
    if bad is not None:
        raise ValueError(f"{bad!r} is not a 3Di letter (those are {STRUCTURE_LETTERS[:-1]}, and # for none)")
    ids = [TOKEN_TO_IDX.get(a + s, UNK_IDX) for a, s in zip(sequence, structure)]
    return np.array([CLS_IDX, *ids, EOS_IDX], dtype=np.int32)


def masked_residue_ids(structure: str) -> np.ndarray:
    """Per residue, the token that masks its amino acid and keeps its 3Di letter (``#`` + letter):
    how SaProt's authors and ProteinGym mask a mutated position (not ``<mask>``)."""
    return np.array([TOKEN_TO_IDX[UNKNOWN + s] for s in structure.lower()], dtype=np.int32)


def amino_acid_columns(letters: str) -> np.ndarray:
    """(len(letters), 21) token ids: row i the 21 tokens of amino acid ``letters[i]`` (one per 3Di
    letter, ``#`` included), whose probabilities ProteinGym sums into the amino acid's."""
    first = np.array([TOKEN_TO_IDX[a + STRUCTURE_LETTERS[0]] for a in letters])
    return first[:, None] + np.arange(len(STRUCTURE_LETTERS))[None, :]


def amino_acid_log_probs(log_probs: np.ndarray, letters: str) -> np.ndarray:
    """log P(amino acid) at each row of ``log_probs`` (..., 446): the log of the summed
    probabilities of its 21 combined tokens (ProteinGym's SaProt marginal over structure letters)."""
    columns = amino_acid_columns(letters)  # (A, 21)
    picked = np.asarray(log_probs, np.float64)[..., columns]  # (..., A, 21)
    top = picked.max(axis=-1, keepdims=True)
    return (top[..., 0] + np.log(np.exp(picked - top).sum(axis=-1))).astype(np.float32)
