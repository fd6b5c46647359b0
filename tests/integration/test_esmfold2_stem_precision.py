"""ESMFold2's opt-in bf16 stem, the mechanism of ESMFold's (``weights.esmfold.with_stem_precision``,
one function for both): ESM C's dense kernels stored in bf16 and nothing else, its hidden states
close to fp32's within bf16's rounding, the CLI's label in every file (said "emulated" on a CPU
without bf16 arithmetic), a store key of its own, and the device plan that picks bf16 for ESM C
6B's shape on a 16 GiB chip (abstract shapes: no weights)."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from flamino_core.cli import main
from flamino_core.engine import hardware
from flamino_core.engine.device_memory import DeviceMemory, ModelTooLargeError
from flamino_core.engine.fold import stem_note, stem_pass
from flamino_core.model.esmfold2.config import EsmFold2Config
from flamino_core.model.esmfold2.features import prepare_features
from flamino_core.model.model_id import ModelId
from flamino_core.structure.folding.complex_prediction import complex_key, stem_precision_plan
from flamino_core.weights.esmfold2_hub import load_fold2_model

TINY = ModelId.parse("random:esmfold2-tiny")
CHAINS = ["MKTAYIAKQRQISFVKSHFSRQ", "GSHMLEDPVAGKTVL"]
V5E = DeviceMemory("TPU v5 lite", int(15.75 * 2**30), 0)  # what JAX lets a program hold on a 16 GiB v5e


def _kernels(module):
    return [leaf for path, leaf in jax.tree_util.tree_leaves_with_path(nnx.state(module))
            if "kernel" in jax.tree_util.keystr(path)]


def test_only_esm_cs_dense_kernels_become_bf16_and_its_states_stay_close():
    exact, _ = load_fold2_model(TINY)
    fast, _ = load_fold2_model(TINY, stem_precision="bf16")
    assert fast.stem_precision == "bf16" and exact.stem_precision == "fp32"
    assert _kernels(fast.esmc) and all(k.dtype == jnp.bfloat16 for k in _kernels(fast.esmc))
    others = [leaf for name in ("folding_trunk", "structure_head", "confidence_head", "language_model")
              for leaf in jax.tree.leaves(nnx.state(getattr(fast, name)))]
    assert others and all(leaf.dtype == jnp.float32 for leaf in others)  # the rest stays fp32
    features = prepare_features(CHAINS)
    ours = np.asarray(fast.language_model_states(features, stem_pass(fast)))
    theirs = np.asarray(exact.language_model_states(features, stem_pass(exact)))
    assert not np.array_equal(ours, theirs)  # the option changes the computation
    # bf16 keeps 8 significant bits: each operand of a product rounded by at most 2^-9 relative, so
    # a dense layer's output moves by ~2^-8 of its scale, compounding over the tiny ESM C's layers
    # (LayerNorm rescales between them). Measured when this was written (seeds 0, 1, 2, these two
    # chains): the largest difference 0.55-1.07% of the layer's largest magnitude, and exactly 0 at
    # the embeddings (no dense layer). The bound, 5%, ~5x that, guards against a broken path (a
    # wrong cast, NaN, the chains' rows mixed), not a parity claim.
    assert np.array_equal(ours[..., 0, :], theirs[..., 0, :])
    scale = np.abs(theirs).max(axis=(0, 1, 3), keepdims=True)
    assert np.isfinite(ours).all() and (np.abs(ours - theirs) / scale).max() < 0.05
    with pytest.raises(ValueError, match="choose one of fp32, bf16"):
        load_fold2_model(TINY, stem_precision="fp16")


def test_a_bf16_stem_is_stored_apart_and_fp32_keeps_its_key():
    assert complex_key(TINY, "bf16") != complex_key(TINY) == complex_key(TINY, "fp32")
    assert complex_key(TINY, "bf16").endswith("|stem=bf16")


def test_the_label_says_emulated_where_the_cpu_has_no_bf16():
    fast, _ = load_fold2_model(TINY, stem_precision="bf16")
    note = stem_note(fast)
    assert note.startswith("stem in bf16")
    assert ("emulated" in note) == (not hardware.detect().native_bf16)
    assert stem_note(load_fold2_model(TINY)[0]) == ""


def test_the_plan_picks_bf16_for_the_6b_stem_on_a_16_gib_chip():
    config = EsmFold2Config.esmfold2_fast()  # ESM C 6B's shape (eval_shape: no arrays are made)
    precision, why = stem_precision_plan(config, None, V5E)
    assert precision == "bf16" and "fp32 needs" in why and "ESM C stem" in why
    assert stem_precision_plan(config, "bf16", V5E)[0] == "bf16"
    with pytest.raises(ModelTooLargeError, match=r"bf16 weights: 1[12]\.\d GiB"):  # fp32 by name: refused, bf16 named
        stem_precision_plan(config, "fp32", V5E)
    assert stem_precision_plan(config, None, None) == ("fp32", "")  # a CPU: nothing changes
    big = DeviceMemory("TPU v5p", 95 * 2**30, 0)
    assert stem_precision_plan(config, None, big) == ("fp32", "")  # fp32 fits: fp32
    assert stem_precision_plan(EsmFold2Config.tiny(), None, V5E) == ("fp32", "")


def test_the_cli_folds_a_complex_with_a_bf16_stem_and_labels_every_file(tmp_path, capsys):
    fasta = tmp_path / "in.fa"
    fasta.write_text(f">pair\n{CHAINS[0]}:{CHAINS[1]}\n")
    out = tmp_path / "o"
    assert main(["fold", str(fasta), "-m", TINY.text, "-o", str(out), "--passes", "1", "--samples", "1",
                 "--steps", "2", "--stem-precision", "bf16"]) == 0
    assert "stem in bf16" in capsys.readouterr().err
    cif = (out / "pair.cif").read_text()
    title = next(line for line in cif.splitlines() if line.startswith("_struct.title"))
    assert "stem in bf16" in title and "UNTRAINED" in title
    assert "stem in bf16" in json.loads((out / "pair.confidences.json").read_text())["model"]
    assert "|stem=bf16" in (out / ".folds.journal.jsonl").read_text()  # resumed apart from fp32's folds
