"""The jitted fold of one sequence with an ``ESMFold`` model (split once, a pure function of
``(graphdef, state, inputs)``, compiled once per length, pass count, chunk size and stem pass) and
its result as NumPy arrays a PDB writer or a table reads. The stem's pass is handed in (``stem``,
``model.StemPass``): the engine's, traced inside this program; ``engine/fold.py`` folds through it
(``fold_sequence``, ``fold_arrays``: what the app, the CLI and the tests call).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from flamino_core.model.esmfold import residue_constants as rc
from flamino_core.model.esmfold.folded import PAD_TO, FoldedProtein, padded_length  # noqa: F401  (re-exported)
from flamino_core.model.esmfold.model import StemPass


@functools.partial(jax.jit, static_argnames=("graphdef", "passes", "chunk_size", "matmul_precision", "stem"))
def _forward(graphdef, state, aatype, mask, passes, chunk_size, matmul_precision=None, stem=None):
    # Traced at the caller's matmul precision, as the engine's passes are: on a TPU/GPU JAX's
    # default float32 product is one bf16 pass (TF32 on a GPU), far outside the reference's numbers;
    # ``structure.folding.fold`` passes 'highest' there (``hardware.exact_matmul_precision``). The
    # stem's pass sets its own (the engine's backend's), inside this one.
    with jax.default_matmul_precision(matmul_precision):
        model = nnx.merge(graphdef, state)
        out = model(aatype, mask, passes=passes, chunk_size=chunk_size, stem=stem)
    return {"atom37": out.atom37, "atom37_exists": out.atom37_exists, "plddt": out.plddt, "pae": out.pae,
            "ptm": out.ptm, "positions": out.positions, "recycle_bins": out.recycle_bins}


def fold_arrays(model, sequence: str, stem: StemPass, passes: int | None = None, chunk_size: int | None = None,
                pad_to: int | None = PAD_TO, matmul_precision: str | None = None) -> dict[str, np.ndarray]:
    """The forward pass's arrays for one sequence (batch axis of 1), cut to its residues:
    ``atom37``, ``atom37_exists``, ``plddt``, ``pae``, ``ptm``, ``positions`` (every
    structure-module iteration) and ``recycle_bins`` (what each pass was fed). ``sequence``
    uppercase; ``stem`` hashable (a static argument: one compilation per stem pass); the rest as
    ``engine.fold.fold_sequence``."""
    graphdef, state = nnx.split(model)
    length = len(sequence)
    width = padded_length(length, pad_to)
    aatype = np.zeros((1, width), np.int32)
    aatype[0, :length] = rc.aatype(sequence)
    mask = np.arange(width)[None] < length
    passes = passes if passes is not None else model.config.trunk.max_recycles
    out = jax.device_get(_forward(graphdef, state, jnp.asarray(aatype), jnp.asarray(mask), passes, chunk_size,
                                  matmul_precision, stem))
    cut = {"atom37": (slice(None), slice(length)), "atom37_exists": (slice(None), slice(length)),
           "plddt": (slice(None), slice(length)), "pae": (slice(None), slice(length), slice(length)),
           "positions": (slice(None), slice(None), slice(length)),
           "recycle_bins": (slice(None), slice(None), slice(length), slice(length))}
    return {key: value[cut[key]] if key in cut else value for key, value in out.items()}


def folded_protein(sequence: str, out: dict[str, np.ndarray]) -> FoldedProtein:
    """``fold_arrays``'s result as the ``FoldedProtein`` of ``sequence`` (uppercase)."""
    return FoldedProtein(sequence, rc.aatype(sequence), out["atom37"][0], out["atom37_exists"][0], out["plddt"][0],
                         out["pae"][0], float(out["ptm"][0]))
