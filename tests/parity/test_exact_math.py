"""``model/exact_math``'s functions against float64 NumPy/SciPy (the independent reference), on
dense grids over the ranges the fold meets. They exist because a TPU's own exp/log/softplus are
tens to hundreds of ulp off (measured on a v5e, benchmarks/recorded/esmfold2-chip-parity-*.md); they
are built from additions, products, one division and exponent bits only, so what they compute
here on the CPU is what they compute on a chip (its fp32 adds, products and division: <= 1.5 ulp,
measured there).

Bounds: a few ulp of float32 (1 ulp = 2^-23 = 1.19e-7 relative). The algorithms' truncation is
under 1e-9 relative (docstrings), so what remains is float32 rounding of ~10 operations: measured
0.6-2.7 ulp on this machine. Checked to fail: exp's r^3 coefficient 1/24 for 1/6 (5e-3 relative
at the interval's edge: 5 tests fail) and ln 2's low part 10x too small (8 fail).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from scipy import special

from flamino_core.model import exact_math

ULP = 2.0 ** -23


def ulps(have, want, floor=0.0):
    """Largest error in fp32 ulps, relative to max(|want|, floor)."""
    have, want = np.asarray(have, np.float64), np.asarray(want, np.float64)
    return (np.abs(have - want) / np.maximum(np.abs(want), floor)).max() / ULP


def grid(low, high, count=400_001):
    return np.linspace(low, high, count).astype(np.float32)


@pytest.mark.parametrize(("name", "function", "reference", "inputs", "floor"), [
    # exp over every normal float32 result; sigmoid/silu/softplus as gates use them (|x| <= 80).
    ("exp", exact_math.exp, np.exp, grid(-87.0, 88.5), 0.0),
    ("log", exact_math.log, np.log, np.geomspace(1.2e-38, 3e38, 400_001).astype(np.float32), 1e-30),
    ("log near 1", exact_math.log, np.log, grid(0.5, 2.0), 1e-30),
    ("log1p", exact_math.log1p, np.log1p, np.geomspace(1e-30, 1e3, 400_001).astype(np.float32), 0.0),
    ("softplus", exact_math.softplus, lambda v: np.logaddexp(0.0, v), grid(-80.0, 80.0), 0.0),
    # Gates are read against 1 (a gate of 1e-30 matters by its absolute error).
    ("sigmoid", exact_math.sigmoid, special.expit, grid(-80.0, 80.0), 1.0),
    ("silu", exact_math.silu, lambda v: v * special.expit(v), grid(-80.0, 80.0), 1.0),
], ids=lambda v: v if isinstance(v, str) else "")
def test_within_a_few_ulp_of_float64(name, function, reference, inputs, floor):
    have = jax.jit(function)(inputs)
    assert ulps(have, reference(inputs.astype(np.float64)), floor) < 4.0, name


def test_edges_are_the_ieee_values():
    """Overflow to inf, underflow to 0, log of 0 and of a negative number: what jnp gives."""
    assert np.asarray(exact_math.exp(np.float32([89.0, 1e4, -110.0, -1e4, 0.0]))).tolist() == [np.inf, np.inf, 0, 0, 1]
    logs = np.asarray(exact_math.log(np.float32([0.0, -1.0, np.inf, 1.0])))
    assert logs[0] == -np.inf and np.isnan(logs[1]) and logs[2] == np.inf and logs[3] == 0.0


def test_softmax_rows_match_float64():
    logits = np.random.default_rng(0).normal(size=(64, 300)).astype(np.float32) * 10
    want = special.softmax(logits.astype(np.float64), axis=-1)
    assert ulps(exact_math.softmax(logits), want, floor=1.0) < 4.0
    assert ulps(exact_math.softmax(logits.T, axis=0).T, want, floor=1.0) < 4.0
