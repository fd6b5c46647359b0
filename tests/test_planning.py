"""Planning rows and merging windows, as pure functions: memory in proportion to length."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from flamino_core import planning
from flamino_core.config import MAX_RESIDUES


def _window_outputs(windows, width: int, contacts: bool, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    outputs = []
    for w in windows:
        n = len(w.residues)
        out = {"representations": {2: rng.standard_normal((n, width), dtype=np.float32)}}
        if contacts:
            out["contacts"] = rng.random((n, n), dtype=np.float32)
        outputs.append(out)
    return outputs


def test_merging_windows_of_a_long_sequence_takes_memory_in_proportion_to_its_length():
    length, width = 300_000, 8  # 586 windows; an (L, L) float32 map would be 360 GB
    sequence = "A" * length
    windows = planning.windows([sequence], windowed=True)
    outputs = _window_outputs(windows, width, contacts=False)
    tracemalloc.start()
    try:
        merge = planning.WindowMerge([sequence], windows)
        for index, output in enumerate(outputs):
            merge.add(index, output)
        merged = merge.result(0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert merged["representations"][2].shape == (length, width) and "contacts" not in merged
    # The merged (L, D) array and an (L, 1) coverage count are all it needs; a full-length
    # array per window, or any (L, L) array, would be many times this.
    one_copy = length * (width + 1) * 4
    assert peak < 1.5 * one_copy, f"peak {peak / 1e6:.1f} MB for a {one_copy / 1e6:.1f} MB result"


def test_merged_windows_average_residues_and_pairs_over_the_windows_that_hold_them():
    length = 2500
    windows = planning.windows(["A" * length], windowed=True)
    assert [w.start for w in windows] == [0, 511, 1022, 1478]
    outputs = _window_outputs(windows, 3, contacts=True, seed=1)
    merge = planning.WindowMerge(["A" * length], windows)
    for index in reversed(range(len(windows))):  # batches finish in any order
        merge.add(index, outputs[index])
    merged = merge.result(0)
    # Independent reference: for every residue and pair, the plain mean over the windows
    # that contain it (pairs in no window: NaN, not predicted).
    reps = np.zeros((length, 3))
    counts = np.zeros(length)
    contacts = np.zeros((length, length))
    pairs = np.zeros((length, length))
    for w, out in zip(windows, outputs):
        inside = np.zeros(length, bool)
        inside[w.start:w.start + len(w.residues)] = True
        reps[inside] += out["representations"][2]
        counts[inside] += 1
        both = np.outer(inside, inside)
        contacts[both] += out["contacts"].ravel()
        pairs[both] += 1
    # The merge sums in float32 (as the engine's outputs are): up to 3 values of size ~1, so
    # about 1e-7 absolute rounding; a value from a wrong window would be off by ~1.
    np.testing.assert_allclose(merged["representations"][2], reps / counts[:, None], atol=1e-6)
    expected = np.divide(contacts, pairs, out=np.full_like(contacts, np.nan), where=pairs > 0)
    np.testing.assert_allclose(merged["contacts"], expected, atol=1e-6)  # NaN where expected is NaN
    assert pairs[0, -1] == 0 and np.isnan(merged["contacts"][0, -1])  # too far apart for one window
    # Every pair at most WINDOW_STEP apart is covered (what the app's note promises), and
    # nothing MAX_RESIDUES or more apart is.
    separation = np.abs(np.subtract.outer(np.arange(length), np.arange(length)))
    assert not np.isnan(merged["contacts"][separation <= planning.WINDOW_STEP]).any()
    assert np.isnan(merged["contacts"][separation >= MAX_RESIDUES]).all()


def test_contacts_of_long_sequences_count_quadratically_in_the_memory_estimate():
    kwargs = dict(windowed=True, per_residue_floats=10)
    assert planning.output_bytes([300_000], **kwargs) == [4 * 300_000 * 10]
    with_contacts = planning.output_bytes([300_000, 500], contacts=True, **kwargs)
    # Merged from windows: a float32 map plus one byte per pair for the window counts.
    assert with_contacts == [4 * 3_000_000 + 5 * 300_000**2, 4 * 5_000 + 4 * 500**2]


def test_masked_rows_are_proteingyms_token_windows():
    """A long sequence's masked rows are 1,024 tokens of <cls> r1 .. rL <eos> (ProteinGym's
    get_optimal_window, tests/test_long_windows.py): <cls> only in the first, <eos> only in the last."""
    rng = np.random.default_rng(2)
    length = 1500
    tokens = rng.integers(4, 29, size=length + 2).astype(np.int32)
    tokens[0], tokens[-1] = 0, 2
    positions = [0, 700, 1499]
    rows, mask_at = planning.pack_masked_rows(tokens, positions, 1024)
    assert rows.shape == (4, 1024)  # three rows, then one filler row: a power of two
    for r, p in enumerate(positions):
        start = {0: 0, 700: 701 - 512, 1499: length + 2 - 1024}[p]  # token windows
        expected = tokens[start:start + 1024].copy()
        expected[p + 1 - start] = 32  # <mask>
        np.testing.assert_array_equal(rows[r], expected)
        assert mask_at[r] == p + 1 - start
    assert rows[0, 0] == 0 and 2 not in rows[0] and 0 not in rows[1] and 2 not in rows[1] and rows[2, -1] == 2
    assert rows[3, :2].tolist() == [0, 2] and (rows[3, 2:] == 1).all()  # <cls><eos>, then padding
    short = tokens[:102].copy()
    short[-1] = 2
    rows, mask_at = planning.pack_masked_rows(short, [5], 128)  # fits: the whole sequence, padded
    assert rows[0, :102].tolist() == [*short[:6], 32, *short[7:]] and (rows[0, 102:] == 1).all()


# --- packing several sequences into one row ------------------------------------------------------
def _realistic_lengths(seed: int, n: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(x) for x in np.clip(rng.lognormal(np.log(300), 0.6, size=n), 1, 1022)]


def test_packed_rows_hold_every_sequence_once_within_capacity_and_pad_little():
    from flamino_core import packing

    lengths = _realistic_lengths(7, 200) + [1, 1, 2, 1022, 1022]
    rows = packing.plan_rows(lengths)
    assert sorted(i for row in rows for i in row.items) == list(range(len(lengths)))
    for row in rows:
        tokens = [lengths[i] + 2 for i in row.items]
        assert row.tokens == sum(tokens) <= packing.PACKED_ROW_TOKENS
        assert list(row.offsets) == np.cumsum([0] + tokens[:-1]).tolist()  # end to end, in order
    # Lower bound: no packing beats the total tokens divided by the row capacity; best-fit
    # decreasing on a mix like this lands within a row or two of it.
    total = sum(n + 2 for n in lengths)
    assert len(rows) <= -(-total // packing.PACKED_ROW_TOKENS) + 2
    # The rows' own padding (to their 16-token bucket) is a few percent of the work; one row per
    # sequence padded to its own bucket would already be more, and batches of mixed rows more still.
    padded = sum(planning.bucket_length(row.tokens) for row in rows)
    assert padded <= 1.03 * total, padded / total
    # Batches: every row once, power-of-two row counts within the token budget, each batch as
    # wide as its longest row needs (in steps of 128 tokens); little padding in all.
    budget = 8192
    batches = packing.plan_batches(rows, lambda width: budget // width)
    assert sorted(i for piece, _ in batches for i in piece) == list(range(len(rows)))
    for piece, width in batches:
        assert len(piece) & (len(piece) - 1) == 0 and len(piece) * width <= budget
        assert width % packing.PACKED_WIDTH_STEP == 0
        assert max(rows[i].tokens for i in piece) <= width < max(rows[i].tokens for i in piece) + 128
    executed = sum(len(piece) * width for piece, width in batches)
    assert executed <= 1.05 * total, executed / total
    # A sequence longer than a row (--long full) gets a row of its own.
    (long_row,) = [r for r in packing.plan_rows([3000, 10, 20]) if 0 in r.items]
    assert long_row.items == (0,) and long_row.tokens == 3002


def test_packed_tokens_and_segments_give_back_each_sequence():
    from flamino_core import packing
    from flamino_core.alphabet import PAD_IDX, decode, encode

    residues = ["MKV", "A", "ACDEFGHIKLMNPQRSTVWY" * 10, "WW"]
    rows = packing.plan_rows([len(r) for r in residues], capacity=220)
    tokens, segments = packing.pack_rows(rows, residues, 224)
    assert tokens.shape == segments.shape == (len(rows), 224)
    seen = []
    for r, row in enumerate(rows):
        assert (np.diff(segments[r]) >= 0).all()  # ids never decrease along a row
        for segment, (item, offset) in enumerate(zip(row.items, row.offsets)):
            here = np.flatnonzero((segments[r] == segment) & (tokens[r] != PAD_IDX))
            np.testing.assert_array_equal(tokens[r, here], encode(residues[item]))  # <cls> ... <eos>
            assert here[0] == offset and decode(tokens[r, here]) == residues[item]
            seen.append(item)
        assert (tokens[r, row.tokens:] == PAD_IDX).all()
        assert (segments[r, row.tokens:] == len(row.items) - 1).all()  # padding: last segment
    assert sorted(seen) == [0, 1, 2, 3]
    # Outputs come back per sequence, without <cls>/<eos>: a fake output that is each token's
    # row and column shows which slice was cut.
    where = np.stack(np.meshgrid(np.arange(len(rows)), np.arange(224), indexing="ij"), -1).astype(np.float32)
    out = {"representations": {6: where}, "logits": where}
    for item, outputs in packing.unpack_rows(out, rows, [len(r) for r in residues]):
        row = next(r for r, row in enumerate(rows) if item in row.items)
        offset = rows[row].offsets[rows[row].items.index(item)]
        assert (outputs["logits"][:, 0] == row).all()
        np.testing.assert_array_equal(outputs["representations"][6][:, 1], offset + 1 + np.arange(len(residues[item])))
    with pytest.raises(ValueError, match="does not fit"):
        packing.pack_rows(rows, residues, 16)
