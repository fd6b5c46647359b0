"""ESMFold's fold with its ESM-2 stem run by the engine: one path for every ESM-2 pass.

The stem of an ``ESMFold`` network is an ``Engine`` (``stem_engine``: built once per network, over
the network's own ``esm`` module, so no copy of its weights), and so gets what ``flamino embed``'s
passes get, chosen the same way (``hardware.configure``): the attention path for this machine (the
fused C++ kernel on a CPU that has it; ``dot_product_attention`` on a TPU/GPU, the Pallas flash
kernel on a TPU in bf16), the precision mode (fp32, with exact products on an accelerator; or the
fold's opt-in bf16 stem, ``--stem-precision bf16``, which is the engine's bf16 mode: on a CPU without
bf16 arithmetic emulated and labelled so rather than refused, the fold's opt-in being allowed
anywhere) and the device memory plan (the stem's pass planned beside the resident fold:
``hardware.configure(resident=True)``).

ESMFold2's ESM C (``fold_complex``) is run the same way, on its chain-aware rows (``esmc_chains``:
the engine's forward given the rows' ``Layout``), eagerly before the trunk as before.

ESMFold's fold stays one jitted program (``model/esmfold/predict.py``): the stem's pass (``StemPass``) is
the engine's compiled forward (``engine.compiled(...).forward``, the very function ``Engine.run``
calls, here keeping every hidden state and no logits), traced inside the fold's program on the
stem's part of the fold's state. A jitted function called in a trace is inlined, so XLA sees the
whole fold as before: the stem's (layers + 1) hidden states are freed once the trunk has mixed them,
and no state crosses to the host between the stem and the trunk.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import Callable

from flax import nnx

from flamino_core.engine.engine import Engine, compiled
from flamino_core.model.esmfold.folded import PAD_TO, FoldedProtein
from flamino_core.model.esmfold import predict
from flamino_core.model.stack import Capture
from flamino_core.options import Precision
from flamino_core.weights.esmfold import stem_network
from flamino_core.weights.loading import ModelWeights

# Each fold network's stem engine, for as long as the network lives (the app and the fold worker
# keep a model for many folds: its engine, and so its compiled folds, are kept with it).
_STEM_ENGINES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclasses.dataclass(frozen=True)
class StemPass:
    """The engine's compiled forward pass of a fold's stem, keeping every hidden state:
    (the stem's state, tokens (B, T)) -> {layer: (B, T, D)} for layers 0..``layers``. Hashable (a
    static argument of the fold's program): equal for engines that share compiled passes."""

    forward: Callable  # ``CompiledPasses.forward``
    layers: int

    @classmethod
    def of(cls, graphdef, attention, matmul_precision: str | None, layers: int) -> "StemPass":
        """The pass of the engines of this graph definition, attention implementation and matmul
        precision (``engine.compiled``: one per process, shared)."""
        return cls(compiled(graphdef, attention, matmul_precision).forward, layers)

    def __call__(self, state, tokens, rows=None):
        """``rows``: the tokens' ``Layout`` where it is not one sequence a row (ESMFold2's chains)."""
        capture = Capture(hidden=tuple(range(self.layers + 1)), logits=False)
        return self.forward(state, tokens, rows, capture=capture).hidden


def stem_engine(model) -> Engine:
    """The ``Engine`` that runs ``model``'s stem (an ``ESMFold``'s or an ``EsmFold2``'s language
    model, ``weights.esmfold.stem_network``), built on first use: precision the network's ``stem_precision``
    (``weights.esmfold.with_stem_precision``, for either network), attention and memory as every
    engine's on this machine."""
    engine = _STEM_ENGINES.get(model)
    if engine is None:
        network = stem_network(model)
        weights = ModelWeights(f"{model.config.name} stem", model.config.stem, None, "the fold's network",
                               checksum=f"stem of {model.config.name} {id(model):x}")  # not kept in the store
        precision = getattr(model, "stem_precision", Precision.FP32)
        engine = _STEM_ENGINES[model] = Engine(weights, precision=precision, network=network)
        # The network holds what the engine placed: one copy of the stem's weights on the device, which
        # the fold's program reads too (a checkpoint's NumPy leaves would otherwise stay on the host
        # beside the engine's device copy, and travel to the device with every fold).
        nnx.update(network, engine.state)
    return engine


STEM_BF16_NOTE = "stem in bf16 (opt-in: not the reference's numbers)"


def stem_note(model) -> str:
    """The label of a fold whose stem runs in bf16 ("" in fp32), saying where the machine only
    emulates bf16 (a CPU without bf16 arithmetic: the engine's ``precision_why``)."""
    if getattr(model, "stem_precision", Precision.FP32) == Precision.FP32:
        return ""
    why = stem_engine(model).backend.precision_why
    return f"{STEM_BF16_NOTE}, {why}" if why else STEM_BF16_NOTE


def stem_pass(model) -> StemPass:
    """``model``'s stem pass, the engine's (``stem_engine``), for the fold's program (ESMFold) or
    its language-model step (ESMFold2)."""
    engine = stem_engine(model)
    return StemPass.of(engine.graphdef, engine.backend.implementation, engine.backend.matmul_precision,
                       engine.config.num_layers)


def fold_arrays(model, sequence: str, passes: int | None = None, chunk_size: int | None = None,
                pad_to: int | None = PAD_TO, matmul_precision: str | None = None) -> dict:
    """``predict.fold_arrays`` with ``model``'s stem run by the engine; arguments as ``fold_sequence``."""
    stem = stem_pass(model)  # first: the engine may set the stem's precision on the network (bf16)
    return predict.fold_arrays(model, sequence, stem, passes, chunk_size, pad_to, matmul_precision)


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
      matmul_precision: JAX's matmul precision for the trunk (None: the platform's default, exact on
        a CPU only; ``structure.folding.fold`` chooses it for the machine). The stem's is its engine's.
    """
    sequence = sequence.upper()
    if not sequence:
        raise ValueError("an empty sequence has no structure to predict")
    return predict.folded_protein(sequence, fold_arrays(model, sequence, passes, chunk_size, pad_to, matmul_precision))


def fold_complex(model, chains, name: str = "prediction", chain_names=None, **options):
    """ESMFold2's ``predict.fold_complex`` with its ESM C run by the engine (``stem_pass``): the
    arguments and result as there (a ``FoldedComplex``)."""
    from flamino_core.model.esmfold2 import predict as complex_predict

    return complex_predict.fold_complex(model, chains, name, chain_names, stem=stem_pass(model), **options)
