"""Issue #53 item 4: Streamlit's upload store bounded in bytes over every visitor, not only per
visitor (``uploads.make_room``): one visitor's 16 files of 2 MB are 32 MB, so visitors of many
addresses (or forged ``X-Forwarded-For`` values where the operator names a header no proxy
overwrites) held memory bounded only by their number.

The store here is Streamlit's own manager behind the app's bound, with a 2 kB "PUT" and a bound of
20 of them (the server's are 2 MB and 256 MB: only the ratio matters). The live flood of many
forged addresses is ``benchmarks/hostile_visitor.py flood-addresses`` (docs/reliability.md).
"""

from __future__ import annotations

import pytest
from starlette.exceptions import HTTPException
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from app_pages._ui.input import uploads

PUT = b"x" * 2_000
BOUND = 20 * len(PUT)


@pytest.fixture
def store(monkeypatch):
    """A bounded store where every session is a visitor of its own (a new address each), a clock
    the test moves, and sessions ``closed-*`` closed."""
    manager = MemoryUploadedFileManager("/_stcore/upload_file")
    clock = [1000.0]
    monkeypatch.setattr(uploads, "_store", lambda: manager)
    monkeypatch.setattr(uploads, "_visitor_of", lambda session: f"address {session}")
    monkeypatch.setattr(uploads, "_active_sessions", lambda: lambda session: not session.startswith("closed"))
    monkeypatch.setattr(uploads, "_now", lambda: clock[0])
    monkeypatch.setattr(uploads, "_visitors", {})
    monkeypatch.setattr(uploads, "_arrived", {})
    monkeypatch.setattr(uploads, "STORE_BYTES", BOUND)
    monkeypatch.setattr(uploads, "SWEEP_SECONDS", 3600.0)  # the sweep is not what bounds it here
    uploads.bound_streamlit_uploads()
    manager.clock = clock
    return manager


def put(store, session: str, name: str) -> None:
    store.add_file(session, UploadedFileRec(name, f"{name}.bin", "application/octet-stream", PUT))


def held(store) -> int:
    return sum(len(rec.data) for files in store.file_storage.items() for rec in files[1].values())


def test_many_addresses_each_within_its_own_bound_hold_no_more_than_the_whole_stores(store):
    """100 addresses x 16 PUTs, a second apart (each visitor within its own 16 files: before this
    bound 1,600 files were kept, 3.2 GB at the server's 2 MB). The store never passes its bound,
    keeps the newest files, and the last PUTs are all there."""
    for address in range(100):
        for n in range(16):
            store.clock[0] += 1.0
            put(store, f"visitor-{address}", f"f{n}")
            assert held(store) <= BOUND
    kept = [(s, f) for s, files in store.file_storage.items() for f in files]
    assert len(kept) == BOUND // len(PUT)
    assert kept == [(f"visitor-{a}", f"f{n}") for a in range(100) for n in range(16)][-len(kept):]
    assert store._total_bytes == held(store)


def test_a_closed_sessions_files_go_before_an_open_sessions_older_ones(store):
    """Room is made from closed sessions first (their files serve no one), then the oldest."""
    for n in range(10):
        put(store, "open", f"o{n}")
    store.clock[0] += 10
    for n in range(10):
        put(store, "closed-tab", f"c{n}")
    store.clock[0] += 10
    put(store, "newcomer", "n0")
    assert list(store.file_storage["open"]) == [f"o{n}" for n in range(10)]
    assert list(store.file_storage["closed-tab"]) == [f"c{n}" for n in range(1, 10)]
    assert list(store.file_storage["newcomer"]) == ["n0"]


def test_a_put_with_no_room_among_files_in_their_grace_is_refused_with_words(store):
    """Files younger than GRACE_SECONDS may still wait for their uploader's callback: they are not
    dropped, and a PUT that finds the store full of them is refused (503, the reason and when to
    try again), the store unchanged; after the grace the same PUT makes its room."""
    for n in range(20):
        put(store, f"burst-{n}", "f")
    before = {s: list(f) for s, f in store.file_storage.items()}
    with pytest.raises(HTTPException) as refused:
        put(store, "late", "f")
    assert refused.value.status_code == 503
    assert "iB of uploads at once" in refused.value.detail and "try again" in refused.value.detail
    assert {s: list(f) for s, f in store.file_storage.items()} == before
    store.clock[0] += uploads.GRACE_SECONDS
    put(store, "late", "f")
    assert not store.file_storage.get("burst-0") and list(store.file_storage["late"]) == ["f"]
    assert held(store) == BOUND
