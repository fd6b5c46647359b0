"""The corrections the contact head applies to attention maps, for NumPy and JAX arrays alike.

Written with array methods and operators only, so the contact head (``model``, traced by
JAX) and the attention page's analyses (``analysis``, NumPy) run the same lines.
"""

from __future__ import annotations


def symmetrize(x):
    """x + x^T over the last two axes, as the contact head does before APC."""
    return x + x.swapaxes(-1, -2)


def apc(x):
    """Average product correction over the last two axes (Dunn et al. 2008).

    Subtracts row_sum * column_sum / total from every entry, removing the background that
    some positions attend to (or are attended by) everything; the dtype is the input's. A map
    whose entries sum to zero (an all-zero one, say) is returned unchanged.
    """
    row = x.sum(-1, keepdims=True)
    col = x.sum(-2, keepdims=True)
    total = x.sum((-1, -2), keepdims=True)
    nonzero = total != 0
    # Where total != 0 both guards are exact no-ops (row * 1, total + 0), so the contact head's
    # arithmetic, and with it parity, is the references' x - row * col / total.
    return x - (row * nonzero) * col / (total + ~nonzero)
