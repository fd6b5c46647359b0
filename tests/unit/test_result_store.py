"""The result store: values come back exactly, damage is detected, a kill mid-write leaves no
partial write, several processes share it, eviction drops the least recently used entries.

The model-side tests (``passes``) are in tests/integration/test_passes.py.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np

from flamino_core.store import result_store
from flamino_core.store.result_store import ResultStore

MODEL = "fingerprint-a"
SEQUENCE = "MVHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTPDAVMGNPKVKAHGKKVLGAFSDGLAHLDNLKGTFATLSELHCDKLHVDPENFRLLGNVLVCVLAHHFGKEFTPPVQAAYQKVVAGVANALAHKYH"


def _log_probs(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, 33)).astype(np.float32)


def test_masked_values_come_back_bit_for_bit_and_missing_positions_are_named(tmp_path):
    store = ResultStore(tmp_path / "r.sqlite")
    values = _log_probs(5, 0)
    store.put_masked(MODEL, SEQUENCE, [3, 0, 7, 9, 1], values)
    got = store.masked(MODEL, SEQUENCE, range(10))
    assert sorted(got) == [0, 1, 3, 7, 9]
    for row, position in enumerate([3, 0, 7, 9, 1]):
        assert got[position].tobytes() == values[row].tobytes()
    assert store.missing(MODEL, SEQUENCE, [9, 8, 2, 3]) == [8, 2]
    # Another model, or another sequence, shares nothing.
    assert store.masked("fingerprint-b", SEQUENCE, range(10)) == {}
    assert store.masked(MODEL, SEQUENCE[:-1], range(10)) == {}


def test_outputs_keep_dtype_and_shape_and_a_new_value_replaces_the_old(tmp_path):
    store = ResultStore(tmp_path / "r.sqlite")
    mean = np.arange(320, dtype=np.float32) / 7
    logits = _log_probs(len(SEQUENCE), 1)
    store.put_outputs(MODEL, SEQUENCE, {"mean/6": mean, "logits": logits, "n": np.array(3, np.int64)})
    got = store.outputs(MODEL, SEQUENCE, ["mean/6", "logits", "n", "absent"])
    assert set(got) == {"mean/6", "logits", "n"}
    np.testing.assert_array_equal(got["mean/6"], mean)
    assert got["logits"].shape == logits.shape and got["logits"].dtype == np.float32
    assert got["n"].dtype == np.int64 and int(got["n"]) == 3
    store.put_outputs(MODEL, SEQUENCE, {"mean/6": mean * 2})
    np.testing.assert_array_equal(store.outputs(MODEL, SEQUENCE, ["mean/6"])["mean/6"], mean * 2)
    # Sizes are accounted for replacements: what is counted is what is held.
    held = mean.nbytes + logits.nbytes + 8
    assert store.stats().value_bytes == held


def test_a_damaged_value_is_dropped_and_reported_missing_never_returned(tmp_path):
    path = tmp_path / "r.sqlite"
    store = ResultStore(path)
    store.put_masked(MODEL, SEQUENCE, [0, 1, 2], _log_probs(3, 2))
    store.put_outputs(MODEL, SEQUENCE, {"mean/6": np.ones(8, np.float32)})
    # Damage one byte of position 1's value and of the output, behind the store's back.
    with sqlite3.connect(path) as raw:
        value = bytearray(raw.execute("SELECT value FROM masked WHERE position = 1").fetchone()[0])
        value[5] ^= 0x40
        raw.execute("UPDATE masked SET value = ? WHERE position = 1", (bytes(value),))
        raw.execute("UPDATE outputs SET value = ?", (np.full(8, 1.5, np.float32).tobytes(),))
    fresh = ResultStore(path)
    assert sorted(fresh.masked(MODEL, SEQUENCE, [0, 1, 2])) == [0, 2]
    assert fresh.missing(MODEL, SEQUENCE, [0, 1, 2]) == [1]
    assert fresh.outputs(MODEL, SEQUENCE, ["mean/6"]) == {}
    with sqlite3.connect(path) as raw:  # deleted, so a recomputed value can take its place
        assert raw.execute("SELECT COUNT(*) FROM masked").fetchone()[0] == 2


def test_a_file_that_is_not_a_store_is_moved_aside_and_a_new_store_started(tmp_path):
    path = tmp_path / "r.sqlite"
    path.write_bytes(b"this is not a database, it is half a copy" * 100)
    store = ResultStore(path)
    store.put_masked(MODEL, SEQUENCE, [0], _log_probs(1, 3))
    assert list(store.masked(MODEL, SEQUENCE, [0])) == [0]
    assert any(p.name.startswith("r.sqlite.damaged-") for p in tmp_path.iterdir())


def test_an_unwritable_store_degrades_to_misses_instead_of_failing(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store's folder should be")
    store = ResultStore(blocker / "r.sqlite")
    store.put_masked(MODEL, SEQUENCE, [0], _log_probs(1, 4))  # no exception
    assert store.masked(MODEL, SEQUENCE, [0]) == {}
    assert store.missing(MODEL, SEQUENCE, [0, 1]) == [0, 1]


def test_least_recently_used_entries_are_evicted_past_the_size_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(result_store, "TOUCH_EVERY_SECONDS", 0.0)
    one = np.zeros(1000, np.float32)  # 4,000 bytes per entry
    store = ResultStore(tmp_path / "r.sqlite", max_bytes=10_000)
    clock = iter(range(1_000_000, 2_000_000, 10))
    monkeypatch.setattr(result_store.time, "time", lambda: float(next(clock)))
    store.put_outputs(MODEL, "AAAA", {"x": one})
    store.put_outputs(MODEL, "CCCC", {"x": one})
    assert store.outputs(MODEL, "AAAA", ["x"])  # AAAA used again: CCCC is now the oldest
    store.put_outputs(MODEL, "DDDD", {"x": one})  # 12,000 > 10,000: evict down to 9,000
    assert store.outputs(MODEL, "CCCC", ["x"]) == {}
    assert store.outputs(MODEL, "AAAA", ["x"]) and store.outputs(MODEL, "DDDD", ["x"])
    assert store.stats().value_bytes == 8000


def test_the_running_total_eviction_reads_equals_the_entries_sum(tmp_path, monkeypatch):
    """Eviction reads one ``totals`` row kept by triggers (a SUM over every entry took 36 ms at
    50,000 entries); after puts, replacements, damage, eviction and a store made before the
    row existed, it equals the SUM it stands for."""
    path = tmp_path / "r.sqlite"
    store = ResultStore(path, max_bytes=40_000)

    def agree():
        with sqlite3.connect(path) as raw:
            total = raw.execute("SELECT bytes FROM totals").fetchall()
            assert total == raw.execute("SELECT COALESCE(SUM(bytes), 0) FROM entries").fetchall()
            return total[0][0]

    for k in range(12):  # 5 x 33 x 4 = 660 bytes of masked values and 4,000 of outputs each
        sequence = SEQUENCE[k:k + 60]
        store.put_masked(MODEL, sequence, range(5), _log_probs(5, k))
        store.put_outputs(MODEL, sequence, {"x": np.zeros(1000, np.float32)})
    assert agree() <= 40_000 and store.stats().entries < 12  # 55,920 bytes put: evicted down to the bound
    store.put_outputs(MODEL, SEQUENCE[11:71], {"x": np.zeros(10, np.float32)})  # replaced: smaller
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE masked SET value = X'00' WHERE position = 0")
    store.masked(MODEL, SEQUENCE[11:71], range(5))  # the damaged value is dropped
    assert agree() == store.stats().value_bytes
    # A store from before the totals row: the row is counted from its entries on opening.
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TABLE totals")
    assert ResultStore(path).stats().value_bytes == agree()
    store.clear()
    assert agree() == 0


_WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    from flamino_core.store import result_store
    from flamino_core.store.result_store import ResultStore
    # Say "inside" halfway through the third chunk's values (checksummed as they are inserted),
    # so a kill on reading it lands in the middle of a write.
    calls, checksum = [0], result_store.checksum
    def counting(*parts):
        calls[0] += 1
        if calls[0] == int(sys.argv[2]) * 5 // 2:
            print("inside", flush=True)
        return checksum(*parts)
    result_store.checksum = counting
    store = ResultStore(sys.argv[1])
    chunk = int(sys.argv[2])
    sequence = "M" * 1_000_000
    rng = np.random.default_rng(int(sys.argv[3]))
    offset = int(sys.argv[4])
    for k in range(10_000):
        positions = range(offset + k * chunk, offset + (k + 1) * chunk)
        store.put_masked("m", sequence, positions, rng.normal(size=(chunk, 33)).astype(np.float32))
        print(k, flush=True)
""")


def test_a_kill_during_a_write_leaves_every_chunk_whole_or_absent(tmp_path):
    """A writer stores 20,000-position chunks (one transaction each) and is killed with SIGKILL
    in the middle of its third, after half its values were inserted. On reopening, the
    write-ahead log's uncommitted frames are ignored: the store is intact, every stored value
    passes its checksum, and exactly the two committed chunks are held (writing row by row
    without a transaction leaves ~10,000 rows of the third: checked when this test was written)."""
    path = tmp_path / "r.sqlite"
    chunk = 20_000
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(chunk), "0", "0"],
                              stdout=subprocess.PIPE, text=True)
    try:
        lines = [writer.stdout.readline().strip() for _ in range(3)]
        assert lines == ["0", "1", "inside"]
        os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.kill()
        writer.wait(timeout=30)
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    store = ResultStore(path)
    sequence = "M" * 1_000_000
    held = store.masked("m", sequence, range(0, 10 * chunk))
    assert sorted(held) == list(range(2 * chunk))
    with sqlite3.connect(path) as raw:  # and nothing was dropped as damaged
        assert raw.execute("SELECT COUNT(*) FROM masked").fetchone()[0] == len(held)


def test_two_processes_write_the_same_store_at_once(tmp_path):
    path = tmp_path / "r.sqlite"
    chunk = 500
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(chunk), str(seed), str(offset)],
                         stdout=subprocess.PIPE, text=True)
        for seed, offset in ((1, 0), (2, 500_000))
    ]
    try:
        for writer in writers:  # each commits 20 chunks while the other writes too
            committed = 0
            while committed < 20:
                line = writer.stdout.readline().strip()
                assert line, "the writer stopped"
                committed += line.isdigit()
    finally:
        for writer in writers:
            writer.kill()
            writer.wait(timeout=30)
    store = ResultStore(path)
    sequence = "M" * 1_000_000
    first = store.masked("m", sequence, range(0, 20 * chunk))
    second = store.masked("m", sequence, range(500_000, 500_000 + 20 * chunk))
    assert len(first) == len(second) == 20 * chunk
    expected = np.random.default_rng(2).normal(size=(chunk, 33)).astype(np.float32)
    np.testing.assert_array_equal(np.stack([second[500_000 + i] for i in range(chunk)]), expected)


def test_store_off_keeps_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("FLAMINO_STORE", "off")
    store = result_store.default_store()
    store.put_masked(MODEL, SEQUENCE, [0], _log_probs(1, 5))
    assert store.masked(MODEL, SEQUENCE, [0]) == {}


def test_the_default_store_lives_under_flamino_cache(isolated_cache):
    store = result_store.default_store()
    assert store.path == isolated_cache / "flamino" / result_store.FILE_NAME
    store.put_masked(MODEL, SEQUENCE, [0], _log_probs(1, 6))
    assert store.path.exists()
    assert result_store.default_store() is store
