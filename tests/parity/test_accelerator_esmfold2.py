"""ESMFold2's parity tests again where JAX's default device is a TPU or a GPU: flamino on the chip,
transformers' ``EsmFold2Model`` (the reference) on the host's CPU, the CPU tests' bounds (the trunk
1e-4, one denoiser call 1e-4, a whole sampled structure with the same noise 1e-3 Angstrom,
pLDDT/PAE/pTM/ipTM 1e-3). Every product at float32 precision: ``flamino fold`` and the app pass
``hardware.exact_matmul_precision`` (``highest`` on a TPU) to the fold; the module-level tests call
the modules directly, so this module sets the same precision as JAX's default for its tests.
Skipped where JAX runs on the CPU (CI, this project's machines); how to run them on a chip:
docs/accelerators.md.
"""

from __future__ import annotations

import jax
import pytest

transformers = pytest.importorskip("transformers")

pytestmark = [
    pytest.mark.skipif(
        jax.default_backend() == "cpu",
        reason="no accelerator: JAX's default backend is the CPU here (these run on a TPU or GPU host, "
               "docs/accelerators.md)"),
    # transformers 5.17 (the TPU host's own index, 2026-12-07) builds and saves the MSA encoder for
    # every config (it has no `msa_encoder.enabled`), so its ESMFold2-Fast-layout checkpoints carry
    # 130 keys the published Fast layout lacks: carry the 5.25 wheel (pure Python) to the chip.
    pytest.mark.skipif(tuple(int(p) for p in transformers.__version__.split(".")[:2]) < (5, 25),
                       reason=f"transformers {transformers.__version__}: the reference these tests name is 5.25"),
]

# The CPU parity tests, collected again under this module's skip mark (pytest collects the test
# functions a module holds, imported ones included): the same tests, the same references.
from test_esmfold2_confidence import compared, test_confidence_matches_reference  # noqa: E402,F401
from test_esmfold2_denoiser import hf, test_denoiser_matches_reference  # noqa: E402,F401
from test_esmfold2_predict import checkpoint, msa_checkpoint, test_a_whole_fold_is_the_references  # noqa: E402,F401
from test_esmfold2_trunk import test_trunk_matches_reference, tiny  # noqa: E402,F401


@pytest.fixture(autouse=True, scope="module")
def float32_products():
    """JAX's default product on a TPU is one bf16 pass (6.7e-2 off on ESM-2, issue #47): these
    tests run every product at ``highest``, as the fold's callers choose on an accelerator."""
    previous = jax.config.jax_default_matmul_precision
    jax.config.update("jax_default_matmul_precision", "highest")
    yield
    jax.config.update("jax_default_matmul_precision", previous)
