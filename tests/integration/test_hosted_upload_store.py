"""Issue #53 row 4: Streamlit's upload store bounded per visitor over all their sessions, and a
closed session's files let go at once (``app_pages/_ui/input/uploads.py``).

The live figures (30 raw WebSocket sessions of one address x 16 PUTs of 2 MB against a hosted
server) are ``benchmarks/hostile_visitor.py flood``'s, in docs/reliability.md.
"""

from __future__ import annotations

import pytest
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from app_pages._ui.input import uploads

PUT = b"x" * 2_000  # a PUT's bytes (2 MB on the server; the count is what is bounded)


@pytest.fixture
def store(monkeypatch):
    """A bounded store whose sessions ``attacker-*`` are one visitor (one address) and every other
    session a visitor of its own."""
    manager = MemoryUploadedFileManager("/_stcore/upload_file")
    monkeypatch.setattr(uploads, "_store", lambda: manager)
    monkeypatch.setattr(uploads, "_visitor_of",
                        lambda session: "address 203.0.113.9" if session.startswith("attacker") else f"session {session}")
    monkeypatch.setattr(uploads, "_visitors", {})
    monkeypatch.setattr(uploads, "_arrived", {})
    monkeypatch.setattr(uploads, "SWEEP_SECONDS", 3600.0)  # the sweep is called by the test, not its thread
    uploads.bound_streamlit_uploads()
    return manager


def test_thirty_sessions_of_one_address_keep_one_visitors_files_together(store):
    """The issue's flood: 30 sessions x 16 PUTs; each session was within its own bound (16 on a
    hosted server), so all 480 were kept (+763 MiB at 2 MB). Now the visitor's newest
    ``VISITOR_STORE_FILES`` over all sessions remain,
    and another visitor's file, PUT before the flood, is untouched."""
    store.add_file("visitor", UploadedFileRec("table", "t.csv", "text/csv", b"a,b\n1,2\n"))
    for session in range(30):
        for n in range(16):
            store.add_file(f"attacker-{session}", UploadedFileRec(f"f{n}", f"f{n}.bin", "application/octet-stream", PUT))
    kept = [(s, f) for s, files in store.file_storage.items() if s.startswith("attacker") for f in files]
    assert len(kept) == uploads.VISITOR_STORE_FILES == uploads.STORE_FILES
    every = [(f"attacker-{session}", f"f{n}") for session in range(30) for n in range(16)]
    assert kept == every[-uploads.VISITOR_STORE_FILES:]  # the newest, in arrival order
    assert list(store.file_storage["visitor"]) == ["table"]
    assert store._file_count == len(kept) + 1
    assert store._total_bytes == len(kept) * len(PUT) + len(b"a,b\n1,2\n")


def test_a_whole_input_page_drop_still_fits_one_visitors_bound(store):
    """The Input page takes up to MAX_FILES files in one drop, whose PUTs all arrive before its
    callback reads them: none of them may be dropped, even with files of another tab stored."""
    for n in range(uploads.STORE_FILES - uploads.MAX_FILES):
        store.add_file("attacker-other-tab", UploadedFileRec(f"o{n}", "o.csv", "text/csv", PUT))
    for n in range(uploads.MAX_FILES):
        store.add_file("attacker-input", UploadedFileRec(f"d{n}", f"d{n}.fa", "text/plain", PUT))
    assert list(store.file_storage["attacker-input"]) == [f"d{n}" for n in range(uploads.MAX_FILES)]


def test_a_closed_sessions_files_are_let_go_at_the_next_sweep(store):
    """Streamlit kept a closed session's files until its reconnect window ended (~190 s after the
    sockets closed, in the issue); the sweep drops them while open sessions keep theirs."""
    for session in ("attacker-gone", "open"):
        for n in range(3):
            store.add_file(session, UploadedFileRec(f"f{n}", "f.bin", "application/octet-stream", PUT))
    dropped = uploads.sweep_closed_sessions(store, is_active=lambda session: session == "open")
    assert dropped == 3 * len(PUT)
    assert "attacker-gone" not in store.file_storage and list(store.file_storage["open"]) == ["f0", "f1", "f2"]
    assert store._file_count == 3 and store._total_bytes == 3 * len(PUT)
    assert not [key for key in uploads._arrived if key[0] == "attacker-gone"]
