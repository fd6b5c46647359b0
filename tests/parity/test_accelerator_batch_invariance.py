"""Batch invariance on an accelerator: tests/integration/test_batch_invariance.py's tests collected again where
JAX's default device is a TPU or a GPU (fp32 at the chip's exact matmul precision, its attention
path, packing on or off as each test forces), under the same bound. Skipped on the CPU, where the
imported module runs them already (tests/parity/test_accelerator_parity.py explains the skip mark)."""

from __future__ import annotations

import jax
import pytest

pytestmark = pytest.mark.skipif(
    jax.default_backend() == "cpu",
    reason="no accelerator: JAX's default backend is the CPU here (these run on a TPU or GPU host, docs/accelerators.md)")

from test_batch_invariance import (  # noqa: E402,F401
    pool, test_every_output_of_a_protein_is_the_same_alone_packed_padded_and_reordered,
    test_masked_marginals_are_the_same_whatever_positions_share_their_pass,
)  # fmt: skip
