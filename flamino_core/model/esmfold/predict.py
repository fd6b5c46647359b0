"""Fold one sequence with an ``ESMFold`` model: the jitted forward pass (split once, a pure
function of ``(graphdef, state, inputs)``, compiled once per length, pass count and chunk size)
and its result as NumPy arrays a PDB writer or a table reads.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from flamino_core.model.esmfold import residue_constants as rc
from flamino_core.model.esmfold.folded import PAD_TO, FoldedProtein, padded_length  # noqa: F401  (re-exported)

@functools.partial(jax.jit, static_argnames=("graphdef", "passes", "chunk_size", "matmul_precision"))
def _forward(graphdef, state, aatype, mask, passes, chunk_size, matmul_precision=None):
    # Traced at the caller's matmul precision, as the engine's passes are: on a TPU/GPU JAX's
    # default float32 product is one bf16 pass (TF32 on a GPU), far outside the reference's numbers;
    # ``structure.folding.fold`` passes 'highest' there (``hardware.exact_matmul_precision``).
    with jax.default_matmul_precision(matmul_precision):
        model = nnx.merge(graphdef, state)
        out = model(aatype, mask, passes=passes, chunk_size=chunk_size)
    return {"atom37": out.atom37, "atom37_exists": out.atom37_exists, "plddt": out.plddt, "pae": out.pae,
            "ptm": out.ptm, "positions": out.positions, "recycle_bins": out.recycle_bins}


def fold_arrays(model, sequence: str, passes: int | None = None, chunk_size: int | None = None,
                pad_to: int | None = PAD_TO, matmul_precision: str | None = None) -> dict[str, np.ndarray]:
    """The forward pass's arrays for one sequence (batch axis of 1), cut to its residues:
    ``atom37``, ``atom37_exists``, ``plddt``, ``pae``, ``ptm``, ``positions`` (every
    structure-module iteration) and ``recycle_bins`` (what each pass was fed). ``sequence``
    uppercase; the rest as ``fold_sequence``."""
    graphdef, state = nnx.split(model)
    length = len(sequence)
    width = padded_length(length, pad_to)
    aatype = np.zeros((1, width), np.int32)
    aatype[0, :length] = rc.aatype(sequence)
    mask = np.arange(width)[None] < length
    passes = passes if passes is not None else model.config.trunk.max_recycles
    out = jax.device_get(_forward(graphdef, state, jnp.asarray(aatype), jnp.asarray(mask), passes, chunk_size,
                                        matmul_precision))
    cut = {"atom37": (slice(None), slice(length)), "atom37_exists": (slice(None), slice(length)),
           "plddt": (slice(None), slice(length)), "pae": (slice(None), slice(length), slice(length)),
           "positions": (slice(None), slice(None), slice(length)),
           "recycle_bins": (slice(None), slice(None), slice(length), slice(length))}
    return {key: value[cut[key]] if key in cut else value for key, value in out.items()}


def fold_sequence(model, sequence: str, passes: int | None = None, chunk_size: int | None = None,
                  pad_to: int | None = PAD_TO, matmul_precision: str | None = None) -> FoldedProtein:
    """Predict the structure of ``sequence`` (one protein, one chain).

    Args:
      model: an ``ESMFold``.
      sequence: amino-acid letters; any letter outside the twenty folds as 'X' (as the reference).
      passes: trunk passes (1 + recycles); None: the model's ``max_recycles`` (the reference's default).
      chunk_size: pair-state rows per step in the trunk's attention and pair MLP (less memory, same numbers).
      pad_to: pad the length to a multiple of this (masked residues, which change no residue's
        result beyond float noise: the parity test folds padded) so lengths share compilations.
      matmul_precision: JAX's matmul precision for the whole pass (None: the platform's default,
        exact on a CPU only; ``structure.folding.fold`` chooses it for the machine).
    """
    sequence = sequence.upper()
    if not sequence:
        raise ValueError("an empty sequence has no structure to predict")
    out = fold_arrays(model, sequence, passes, chunk_size, pad_to, matmul_precision)
    return FoldedProtein(sequence, rc.aatype(sequence), out["atom37"][0], out["atom37_exists"][0], out["plddt"][0],
                         out["pae"][0], float(out["ptm"][0]))
