"""fp32 on an accelerator is fp32: the parity tests of ESM-2, ESM-1b/1v and ESM C run again where
JAX's default device is a TPU or a GPU, flamino on the chip and the references (HF transformers,
fair-esm) on the host's CPU, with the CPU tests' bound (1e-4 absolute + 1e-5 relative: see
tests/parity/test_parity.py for why it separates rounding from modelling errors). Logits, every hidden
state, attention maps, contacts and masked marginals, on real proteins; and ESMFold's fold (positions,
pLDDT, PAE, pTM, every recycled distance bin) against ``EsmForProteinFolding``.

Before ``hardware.exact_matmul_precision`` the ESM-2 8M shape was 6.7e-2 off on a TPU v5e (JAX's
default there: one bf16 pass per product); these tests fail that way. Where JAX runs on the CPU
(CI, this project's machines) they are skipped: tests/integration/test_device_memory.py checks on the CPU
that every product is traced at float32 precision on an accelerator. How to run them on one:
docs/accelerators.md.
"""

from __future__ import annotations

import jax
import pytest

from flamino_core import Engine, load_weights

pytestmark = pytest.mark.skipif(
    jax.default_backend() == "cpu",
    reason="no accelerator: JAX's default backend is the CPU here (these run on a TPU or GPU host, docs/accelerators.md)")

# The CPU parity tests, collected again in this module under its skip mark (pytest collects the
# test functions a module holds, imported ones included): the same tests, the same references.
from test_family_parity import (  # noqa: E402,F401
    esm1b_folders, esmc_checkpoints, proteins, test_esm1b_hf_folders_match_transformers,
    test_esm1b_long_protein_runs_in_windows_like_the_reference, test_esm1b_masked_marginals_match_transformers,
    test_esmc_masked_marginals_match_transformers, test_esmc_matches_transformers,
)  # fmt: skip
from test_esmfold_parity import (  # noqa: E402,F401
    checkpoint, folded, protein, test_esmfold_v1_widths_at_reduced_depth_match_the_reference,
    test_fold_with_recycling_matches_the_reference,
)  # fmt: skip
from test_parity import (  # noqa: E402,F401
    real_sequences, test_forward_matches_hf, test_masked_inputs_and_token_dropout_match_hf, test_masked_marginals_match_hf,
    test_plain_forward_and_scan_match_hf_on_long_rows,
)  # fmt: skip


def test_the_engine_runs_on_the_accelerator_with_float32_products():
    engine = Engine(load_weights("random:tiny"))
    assert engine.backend.hardware.platform == jax.default_backend()
    assert engine.backend.matmul_precision in ("highest", "high"), engine.backend.describe()
    print(engine.backend.describe())
