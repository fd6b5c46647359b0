"""SaProt on an accelerator against transformers on the host's CPU: tests/parity/test_saprot.py's parity
tests collected again under tests/parity/test_accelerator_parity.py's skip mark (their fixtures have
names of their own, hence a module of their own)."""

from __future__ import annotations

import jax
import pytest

pytestmark = pytest.mark.skipif(
    jax.default_backend() == "cpu",
    reason="no accelerator: JAX's default backend is the CPU here (these run on a TPU or GPU host, docs/accelerators.md)")

from test_saprot import (  # noqa: E402,F401
    proteins, saprot_folder, test_folder_loads_as_saprot_and_matches_transformers,
    test_masked_passes_are_proteingyms_marginals,
)  # fmt: skip
