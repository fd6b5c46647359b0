"""The row planner, windows and the memory estimate, as pure functions."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from flamino_core.engine import memory, planner, windows
from flamino_core.model.config import MAX_RESIDUES


def _window_outputs(cut, width: int, contacts: bool, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    outputs = []
    for w in cut:
        n = len(w.residues)
        out = {"representations": {2: rng.standard_normal((n, width), dtype=np.float32)}}
        if contacts:
            out["contacts"] = rng.random((n, n), dtype=np.float32)
        outputs.append(out)
    return outputs


def test_merging_windows_of_a_long_sequence_takes_memory_in_proportion_to_its_length():
    length, width = 300_000, 8  # 586 windows; an (L, L) float32 map would be 360 GB
    sequence = "A" * length
    cut = windows.windows([sequence], windowed=True)
    outputs = _window_outputs(cut, width, contacts=False)
    tracemalloc.start()
    try:
        merge = windows.WindowMerge([sequence], cut)
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
    cut = windows.windows(["A" * length], windowed=True)
    assert [w.start for w in cut] == [0, 511, 1022, 1478]
    outputs = _window_outputs(cut, 3, contacts=True, seed=1)
    merge = windows.WindowMerge(["A" * length], cut)
    for index in reversed(range(len(cut))):  # batches finish in any order
        merge.add(index, outputs[index])
    merged = merge.result(0)
    # Independent reference: for every residue and pair, the plain mean over the windows
    # that contain it (pairs in no window: NaN, not predicted).
    reps = np.zeros((length, 3))
    counts = np.zeros(length)
    contacts = np.zeros((length, length))
    pairs = np.zeros((length, length))
    for w, out in zip(cut, outputs):
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
    assert not np.isnan(merged["contacts"][separation <= windows.WINDOW_STEP]).any()
    assert np.isnan(merged["contacts"][separation >= MAX_RESIDUES]).all()


def test_contacts_of_long_sequences_count_quadratically_in_the_memory_estimate():
    kwargs = dict(windowed=True, per_residue_floats=10)
    assert memory.output_bytes([300_000], **kwargs) == [4 * 300_000 * 10]
    with_contacts = memory.output_bytes([300_000, 500], contacts=True, **kwargs)
    # Merged from windows: a float32 map plus one byte per pair for the window counts.
    assert with_contacts == [4 * 3_000_000 + 5 * 300_000**2, 4 * 5_000 + 4 * 500**2]


def test_masked_rows_are_proteingyms_token_windows():
    """A long sequence's masked rows are 1,024 tokens of <cls> r1 .. rL <eos> (ProteinGym's
    get_optimal_window, tests/parity/test_long_windows.py): <cls> only in the first, <eos> only in the last."""
    rng = np.random.default_rng(2)
    length = 1500
    tokens = rng.integers(4, 29, size=length + 2).astype(np.int32)
    tokens[0], tokens[-1] = 0, 2
    positions = [0, 700, 1499]
    spans = [windows.masked_window(p + 1, length + 2) for p in positions]
    rows = planner.masked_rows(tokens, spans, [[p + 1] for p in positions], 1024)
    assert rows.shape == (4, 1024)  # three rows, then one filler row: a power of two
    for r, p in enumerate(positions):
        start = {0: 0, 700: 701 - 512, 1499: length + 2 - 1024}[p]  # token windows
        assert spans[r] == (start, start + 1024)
        expected = tokens[start:start + 1024].copy()
        expected[p + 1 - start] = 32  # <mask>
        np.testing.assert_array_equal(rows[r], expected)
    assert rows[0, 0] == 0 and 2 not in rows[0] and 0 not in rows[1] and 2 not in rows[1] and rows[2, -1] == 2
    assert rows[3, :2].tolist() == [0, 2] and (rows[3, 2:] == 1).all()  # <cls><eos>, then padding
    short = tokens[:102].copy()
    short[-1] = 2
    assert windows.masked_window(6, 102) == (0, 102)
    rows = planner.masked_rows(short, [(0, 102)], [[6]], 128)  # fits: the whole sequence, padded
    assert rows[0, :102].tolist() == [*short[:6], 32, *short[7:]] and (rows[0, 102:] == 1).all()


# --- packing several sequences into one row ------------------------------------------------------
def _realistic_lengths(seed: int, n: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(x) for x in np.clip(rng.lognormal(np.log(300), 0.6, size=n), 1, 1022)]


def _rows(batches):
    return [row for batch in batches for row in batch.rows]


def test_packed_rows_hold_every_sequence_once_within_capacity_and_pad_little():
    lengths = _realistic_lengths(7, 200) + [1, 1, 2, 1022, 1022]
    budget = 8192
    batches = planner.plan(lengths, lambda width: budget // width, pack=True)
    rows = _rows(batches)
    assert sorted(i for row in rows for i in row.items) == list(range(len(lengths)))
    for row in rows:
        tokens = [lengths[i] + 2 for i in row.items]
        assert row.tokens == sum(tokens) <= planner.PACKED_ROW_TOKENS
        assert list(row.offsets) == np.cumsum([0] + tokens[:-1]).tolist()  # end to end, in order
    # Lower bound: no packing beats the total tokens divided by the row capacity; best-fit
    # decreasing on a mix like this lands within a row or two of it.
    total = sum(n + 2 for n in lengths)
    assert len(rows) <= -(-total // planner.PACKED_ROW_TOKENS) + 2
    # The rows' own padding (to their 16-token bucket) is a few percent of the work; one row per
    # sequence padded to its own bucket would already be more, and batches of mixed rows more still.
    padded = sum(planner.bucket_length(row.tokens) for row in rows)
    assert padded <= 1.03 * total, padded / total
    # Batches: power-of-two row counts within the token budget, each batch as wide as its
    # longest row needs (in steps of 128 tokens); little padding in all.
    for batch in batches:
        assert len(batch.rows) & (len(batch.rows) - 1) == 0 and len(batch.rows) * batch.width <= budget
        assert batch.width % planner.PACKED_WIDTH_STEP == 0
        longest = max(row.tokens for row in batch.rows)
        assert longest <= batch.width < longest + 128
    executed = sum(len(batch.rows) * batch.width for batch in batches)
    assert executed <= 1.05 * total, executed / total
    # A sequence longer than a row (--long full) gets a row of its own.
    (long_row,) = [r for r in _rows(planner.plan([3000, 10, 20], lambda width: 8, pack=True)) if 0 in r.items]
    assert long_row.items == (0,) and long_row.tokens == 3002


def test_plain_rows_are_one_sequence_each_in_their_length_bucket():
    """Without packing (and for a single sequence even with it) a row is one sequence, each
    batch as wide as its longest row's 16-token bucket."""
    lengths = [5, 300, 40, 1022, 7]
    for pack in (False, True):
        batches = planner.plan(lengths if not pack else lengths[:1], lambda width: 8192 // width, pack=pack)
        for batch in batches:
            assert all(len(row.items) == 1 and row.offsets == (0,) for row in batch.rows)
            assert batch.width == planner.bucket_length(max(row.tokens for row in batch.rows))
            assert not batch.shared


def test_packed_tokens_and_segments_give_back_each_sequence():
    from flamino_core.alphabet import PAD_IDX, decode, encode

    residues = ["MKV", "A", "ACDEFGHIKLMNPQRSTVWY" * 10, "WW"]
    lengths = [len(r) for r in residues]
    (batch,) = planner.plan(lengths, lambda width: 8, pack=True, capacity=220)
    rows = batch.rows
    tokens, segments = planner.pack(batch, residues)
    assert tokens.shape == segments.shape == (len(rows), batch.width) and batch.shared
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
    where = np.stack(np.meshgrid(np.arange(len(rows)), np.arange(batch.width), indexing="ij"), -1).astype(np.float32)
    out = {"representations": {6: where}, "logits": where}
    for item, outputs in planner.unpack(out, batch, lengths):
        row = next(r for r, row in enumerate(rows) if item in row.items)
        offset = rows[row].offsets[rows[row].items.index(item)]
        assert (outputs["logits"][:, 0] == row).all()
        np.testing.assert_array_equal(outputs["representations"][6][:, 1], offset + 1 + np.arange(len(residues[item])))
    with pytest.raises(ValueError, match="does not fit"):
        planner.pack(planner.Batch(rows, 16), residues)
