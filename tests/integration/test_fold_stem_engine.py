"""The folds' stems run by the engine (``engine/fold.py``, issue #64 item 2): ESMFold's ESM-2 stem
is an ``Engine`` over the fold network's own stem, its hidden states those ``Engine.run`` gives for
the same sequence (the path ``flamino embed`` takes), its attention path and precision mode chosen as
every engine's on this machine, the bf16 stem the engine's bf16 mode (emulated and labelled where the
CPU has no bf16 arithmetic, never refused: the fold's opt-in runs anywhere).

The parity of the whole fold through this path is tests/parity/test_esmfold_parity.py (ESMFold, 1e-3 A)
and tests/parity/test_esmfold2_predict.py (ESMFold2); tests/parity/test_accelerator_parity.py collects the former
on a chip."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from flamino_core.engine import hardware
from flamino_core.engine.engine import TRACE_COUNTS
from flamino_core.engine.fold import fold_sequence, stem_engine, stem_pass
from flamino_core.model.esmfold import residue_constants as rc
from flamino_core.model.model_id import ModelId
from flamino_core.weights.esmfold import load_fold_model

SEQUENCE = "MKTAYIAKQRQISFVKSHFSRQLEERLG"  # 28 residues


def test_the_folds_stem_states_are_the_engines_run_and_its_choices_every_engines():
    model, _ = load_fold_model(ModelId.parse("random:esmfold-tiny"))
    engine = stem_engine(model)
    assert engine is stem_engine(model)  # one engine per network, kept with it
    assert engine.state["layers"]["fc1"]["kernel"][...] is model.esm.layers.fc1.kernel[...]  # its weights, no copy
    chosen = hardware.choose(model.config.stem.head_dim, precision="fp32")
    assert (engine.backend.implementation, engine.backend.precision) == (chosen.implementation, "fp32")
    n = model.config.stem.num_layers
    width = 32  # padded, as the fold pads: padding never reaches a residue's states
    aatype = np.zeros((1, width), np.int32)
    aatype[0, :len(SEQUENCE)] = rc.aatype(SEQUENCE)
    mask = np.arange(width)[None] < len(SEQUENCE)
    folds = np.asarray(model.language_model_states(jnp.asarray(aatype), jnp.asarray(mask), stem_pass(model)))
    embedded = engine.run([SEQUENCE], repr_layers=tuple(range(n + 1)), logits=False, long="full")[0]
    want = np.stack([embedded.representations[layer] for layer in range(n + 1)], axis=1)  # (L, N + 1, D)
    # fp32, one path: only the rows' padding differs (summation order): measured 0 to 1e-6.
    assert np.abs(folds[0, :len(SEQUENCE)] - want).max() < 1e-5 * max(1.0, np.abs(want).max())


def test_a_fold_traces_the_engines_forward_and_a_bf16_stem_is_the_engines_bf16_mode():
    model, _ = load_fold_model(ModelId.parse("random:esmfold-tiny:3"), "bf16")
    before = TRACE_COUNTS["forward"]
    folded = fold_sequence(model, SEQUENCE[:9], passes=1, pad_to=16)
    assert TRACE_COUNTS["forward"] == before + 1  # the stem's pass is the engine's, traced in the fold
    assert np.isfinite(folded.atom37).all()
    backend = stem_engine(model).backend
    assert backend.precision == "bf16"
    native = hardware.detect().native_bf16
    assert ("emulated" in backend.precision_words) == (not native)  # said, not refused
