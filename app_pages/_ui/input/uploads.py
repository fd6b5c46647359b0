"""Uploaded files, kept as sources of their own beside the pasted text.

Streamlit's uploader forgets its files when its page is not shown, so it is used only to take
files in: each file it receives is kept here (name, bytes) and the uploader is emptied (a new
widget key). The Input page lists the kept files, each with its record count and a button that
removes it, records and all. Uploading a file again replaces the one of the same name.

A structure (PDB, mmCIF) is input too: the Input page gives the uploader a ``structure_reader``
(the Structure page's, ``_ui/structure/loaded_structure.py``, which this layer cannot import) that
turns the file into its protein chains' records as FASTA and holds the structure for the
Structure page; the records then go through the one validator like any file's.

``inputs.parse_input`` reads the pasted text and these files together (``fasta.parse_sources``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import logging
import threading
from collections.abc import Callable

import streamlit as st

from flamino_core import settings
from flamino_core.wording import byte_size
from app_pages._ui.server.policy import current_limits, hosted_mode

LOG = logging.getLogger("flamino")
FILES = "_uploaded_files"  # session state: the kept files, in upload order
_GENERATION = "_uploader_generation"  # the uploader's key suffix; a new one empties it
# Files kept per session (the oldest go first): their bytes live in the server's memory.
MAX_FILES = 10 if hosted_mode() else 50


@dataclasses.dataclass(frozen=True)
class Upload:
    """A kept file: its bytes, or the reason it was not kept (``problem``, the bytes dropped)."""

    name: str
    data: bytes
    digest: str  # what the cached parse is keyed by
    problem: str | None = None
    note: str = ""  # what the file was read as, when not FASTA (``structure, 1 protein chain``)
    atoms: int = 0  # a structure's atoms, charged to the session's budget (``Limits.max_upload_atoms``)


def files() -> tuple[Upload, ...]:
    """The kept files, in upload order."""
    return tuple(st.session_state.get(FILES, ()))


# (name, bytes) -> (FASTA text, note) for a structure, None for another file (``uploader``).
StructureReader = Callable[[str, bytes], "tuple[str, str] | None"]


def uploader(structure_reader: StructureReader | None = None, **kwargs) -> None:
    """The file uploader; what it receives is kept and it is emptied for the next files.

    Args:
      structure_reader: ``(name, bytes) -> (FASTA text, note)`` for a structure file, None for
        any other file; raises ``ValueError`` with the reason a structure cannot be read.
    """
    key = f"_uploads_{st.session_state.get(_GENERATION, 0)}"
    st.file_uploader(accept_multiple_files=True, key=key, on_change=_take, args=(key, structure_reader), **kwargs)


def _take(key: str, structure_reader: StructureReader | None = None) -> None:
    limits = current_limits()
    dropped = st.session_state.get(key) or []
    names = {file.name for file in dropped}
    spent = sum(upload.atoms for upload in files() if upload.name not in names)  # kept, not replaced
    for file in dropped:
        problem = limits.check_upload(file.size, "the file")
        data, note, atoms = (b"" if problem else file.getvalue()), "", 0
        if structure_reader is not None and not problem:
            atoms, problem = _charged(data, spent, limits)
            try:
                read = None if problem else structure_reader(file.name, data)
            except ValueError as err:  # a structure that cannot be read: the reader's words
                data, problem = b"", str(err)
            else:
                if read is not None:
                    data, note = read[0].encode(), read[1]
                    spent += atoms
                elif problem:
                    data = b""
        keep(file.name, data, note, problem, atoms if not problem else 0)
    st.session_state[_GENERATION] = st.session_state.get(_GENERATION, 0) + 1


def _charged(data: bytes, spent: int, limits) -> tuple[int, str | None]:
    """(a structure file's atoms, why it is not read): the atoms of every structure of one upload
    and of the session's kept files are bounded together (``max_upload_atoms``), counted on the
    text before anything is parsed (issue #67: 16 different 78,000-atom files in one drop were
    83.8 s of parsing); 0 atoms and no problem for a file that is not a structure, or no budget."""
    if limits.max_upload_atoms is None:
        return 0, None
    from flamino_core.structure import count_atom_lines, looks_like_structure

    if not looks_like_structure(data):
        return 0, None
    atoms = count_atom_lines(data, limits.max_inflated_bytes or len(data))
    if spent + atoms <= limits.max_upload_atoms:
        return atoms, None
    return atoms, (f"not read: its {atoms:,} atoms and the {spent:,} of the structures uploaded before it pass the "
                   f"{limits.max_upload_atoms:,} atoms this server reads from one visitor's uploads; remove a "
                   "structure file first, or run flamino on your own machine")


def keep(name: str, data: bytes, note: str = "", problem: str | None = None, atoms: int = 0) -> None:
    """Keep a file (or records given as FASTA bytes) as a source; a kept file of the same name
    is replaced, and the new one goes last. ``atoms``: a structure's, charged to the session."""
    kept = {upload.name: upload for upload in files()}
    kept.pop(name, None)
    kept[name] = Upload(name, data, hashlib.sha256(data).hexdigest(), problem, note, atoms)
    st.session_state[FILES] = tuple(kept.values())[-MAX_FILES:]


def remove(name: str) -> None:
    """Forget the kept file ``name`` (and so its records)."""
    st.session_state[FILES] = tuple(upload for upload in files() if upload.name != name)


def file_list(records_per_file: tuple[int, ...]) -> None:
    """Each kept file with its record count (or why it was not read) and a remove button."""
    for index, (upload, count) in enumerate(zip(files(), records_per_file, strict=True)):
        row = st.container(horizontal=True, vertical_alignment="center")
        with row:
            status = upload.problem or f"{count:,} record{'s' if count != 1 else ''}"
            status = status if upload.problem or not upload.note else f"{upload.note}: {status}"
            st.text(f"{upload.name} · {status}")
            st.button("Remove", key=f"_remove_upload_{index}", on_click=remove, args=(upload.name,),
                      icon=":material/close:", help="Remove this file and its records")


# --- Streamlit's own store of uploaded files ------------------------------------------------------------------
# Streamlit keeps every file PUT to /_stcore/upload_file/<session>/<file id> in memory until its
# session ends, whether a widget holds it or not: 150 PUTs of 2 MiB into one session kept +297 MiB
# (issue #33). Every uploader of this app copies its file's bytes in its own callback, so
# Streamlit's copy is needed only until that callback ran.
# Files Streamlit may keep per session, the oldest going first: a whole drop of the Input page's
# uploader (up to MAX_FILES at once, whose PUTs all arrive before its callback reads them) plus one
# per other uploader of the app (DMS, labelled table, structure, metadata, predictor, ...).
STORE_FILES = MAX_FILES + 6
# The same bound for one visitor over all their sessions (issue #53): 30 raw WebSocket sessions of
# one address x 16 PUTs of 2 MB held +763 MiB, each session within its own bound. A visitor is
# who the heavy queue's share counts (``FLAMINO_VISITOR_HEADER``, else the connection's address).
VISITOR_STORE_FILES = STORE_FILES
# And the whole store over every visitor (issue #53): a visitor's 16 files of 2 MB are 32 MB, so
# visitors of many addresses (or forged ones, where the operator names a header no proxy
# overwrites) were bounded only by their number. Past this many bytes a PUT first drops closed
# sessions' files, then the oldest, each at least ``GRACE_SECONDS`` old (a younger one may still
# wait for its uploader's callback to copy it); if that does not make room it is refused (503).
STORE_BYTES = settings.MAX_UPLOAD_STORE_MB.get() * 1_000_000 if hosted_mode() else None
UNHELD_SECONDS = 5.0  # a file no widget holds is dropped at the next run this long after its PUT was seen
GRACE_SECONDS = 5.0  # a file this young is not dropped for the whole store's bound
SWEEP_SECONDS = 5.0  # how often the files of closed sessions are let go (Streamlit kept them ~2 min)
_bounded = threading.Lock()
_unheld_since: dict[tuple[str, str], float] = {}
_bounded_store = threading.RLock()
_arrival = itertools.count()
_arrived: dict[tuple[str, str], tuple[int, float]] = {}  # (session, file id) -> (order of arrival, its time)
_visitors: dict[str, str] = {}  # session -> visitor


def bound_streamlit_uploads() -> None:
    """Hold Streamlit's upload store to ``STORE_FILES`` per session and ``VISITOR_STORE_FILES``
    per visitor over all their sessions, dropping the oldest at each PUT, the whole store to
    ``STORE_BYTES`` over every visitor (``make_room``), and let go of a closed
    session's files within ``SWEEP_SECONDS`` (once per process; a no-op outside a server). What it
    cannot do is the proxy's: a limit on the rate of PUT requests (docs/deploy.md)."""
    manager = _store()
    if manager is None:
        return
    with _bounded:
        if getattr(manager, "_flamino_bounded", False):
            return
        add_file = manager.add_file

        def bounded_add_file(session_id, file, *args, **kwargs):
            with _bounded_store:  # two PUTs at once do not both take the last room
                make_room(manager, len(file.data), _active_sessions())
                add_file(session_id, file, *args, **kwargs)
                bound_store(manager, session_id, file.file_id)

        manager.add_file = bounded_add_file
        manager._flamino_bounded = True
        threading.Thread(target=_sweep_closed_sessions, args=(manager,), daemon=True,
                         name="flamino-upload-sweep").start()


def bound_store(manager, session_id: str, file_id: str) -> None:
    """After ``file_id`` arrived in ``session_id``: drop the oldest files past the session's bound,
    then past its visitor's bound over all the visitor's sessions."""
    with _bounded_store:
        _arrived[(session_id, file_id)] = (next(_arrival), _now())
        storage = getattr(manager, "file_storage", {})
        for old in list(storage.get(session_id, {}))[:-STORE_FILES]:  # insertion order: the oldest first
            _forget(manager, session_id, old)
        visitor = _visitors.get(session_id) or _visitors.setdefault(session_id, _visitor_of(session_id))
        theirs = sorted(((_arrived.get((session, name), (-1, 0.0))[0], session, name)
                         for session in list(storage) if _visitors.get(session) == visitor
                         for name in list(storage.get(session, {}))))
        for _, session, name in theirs[:-VISITOR_STORE_FILES]:
            _forget(manager, session, name)


class StoreFull(Exception):
    """A PUT the whole upload store has no room for (``make_room``); a 503 to the client."""


def make_room(manager, size: int, is_active: Callable[[str], bool] = lambda session: True) -> None:
    """Before a file of ``size`` bytes is stored: if the store would pass ``STORE_BYTES``, drop
    closed sessions' files, then the oldest, each older than ``GRACE_SECONDS``, until it fits;
    else raise: Starlette's 503 with the reason and a Retry-After (Streamlit serves with Starlette)."""
    if STORE_BYTES is None:
        return
    with _bounded_store:
        storage = getattr(manager, "file_storage", {})
        held = sum(len(rec.data) for files in list(storage.values()) for rec in list(files.values()))
        if held + size <= STORE_BYTES:
            return
        now = _now()
        droppable = sorted((is_active(session), _arrived.get((session, name), (-1, 0.0))[0], session, name)
                           for session in list(storage) for name in list(storage.get(session, {}))
                           if now - _arrived.get((session, name), (-1, 0.0))[1] >= GRACE_SECONDS)
        for _, _, session, name in droppable:
            held -= len(storage[session][name].data)
            _forget(manager, session, name)
            if held + size <= STORE_BYTES:
                return
    LOG.warning("upload refused: the upload store holds %d bytes of files under %.0f s old (bound %d)",
                held, GRACE_SECONDS, STORE_BYTES)
    message = (f"this server holds at most {byte_size(STORE_BYTES)} of uploads at once and it is taken by "
               f"files of the last {GRACE_SECONDS:.0f} seconds: try again in a few seconds")
    try:
        from starlette.exceptions import HTTPException
    except ImportError:  # pragma: no cover - Streamlit serves with Starlette
        raise StoreFull(message) from None
    raise HTTPException(status_code=503, detail=message, headers={"Retry-After": str(int(GRACE_SECONDS))})


def _now() -> float:
    import time

    return time.monotonic()


def _active_sessions() -> Callable[[str], bool]:
    """Whether a session is open, as the runtime says (every session, outside a runtime)."""
    try:
        from streamlit.runtime import Runtime

        return Runtime.instance().is_active_session if Runtime.exists() else (lambda session: True)
    except Exception:  # noqa: BLE001 - the runtime is shutting down
        return lambda session: True


def sweep_closed_sessions(manager, is_active) -> int:
    """Drop every stored file of a session ``is_active`` says is gone (Streamlit keeps a closed
    session's files until its reconnect window ends); the bytes let go."""
    dropped = 0
    with _bounded_store:
        for session in list(getattr(manager, "file_storage", {})):
            if not is_active(session):
                dropped += sum(len(rec.data) for rec in manager.file_storage.get(session, {}).values())
                manager.remove_session_files(session)
                _visitors.pop(session, None)
                for key in [key for key in _arrived if key[0] == session]:
                    del _arrived[key]
                for key in [key for key in _unheld_since if key[0] == session]:
                    _unheld_since.pop(key, None)
    return dropped


def _sweep_closed_sessions(manager) -> None:
    import time

    while True:
        time.sleep(SWEEP_SECONDS)
        try:
            from streamlit.runtime import Runtime

            if Runtime.exists() and sweep_closed_sessions(manager, Runtime.instance().is_active_session):
                _return_freed_memory()
        except Exception:  # noqa: BLE001,S112 - the runtime is shutting down; the next sweep tries again
            continue


def _return_freed_memory() -> None:
    """Give the freed upload buffers back to the system: glibc keeps freed 2 MB blocks in its heap
    (an upload's PUT body, its multipart copy, the stored bytes) unless asked to trim."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to ask
        pass


def _forget(manager, session_id: str, file_id: str) -> None:
    manager.remove_file(session_id, file_id)
    _arrived.pop((session_id, file_id), None)


def _visitor_of(session_id: str) -> str:
    """The visitor of a session, as ``heavy_jobs.visitor_key`` names it (``visitor_name``), from
    the session's connection (this runs in the upload request, outside any script run)."""
    from app_pages._ui.server.heavy_jobs import visitor_name

    value = address = None
    try:
        from streamlit.runtime import Runtime

        client = Runtime.instance().get_client(session_id) if Runtime.exists() else None
        context = getattr(client, "client_context", None)
        header = (settings.VISITOR_HEADER.get() or "").lower()
        value = next((v for name, v in (context.headers if header and context is not None else ())
                      if name.lower() == header and v), None)
        address = getattr(context, "remote_ip", None)
    except Exception:  # noqa: BLE001 - the runtime is shutting down
        pass
    return visitor_name(value, address, session_id)


def drop_unheld_uploads() -> None:
    """Drop this session's files that no uploader widget holds (their bytes were taken in by the
    uploaders' callbacks), ``UNHELD_SECONDS`` after a run first saw them unheld: a file whose PUT
    has arrived but whose widget's message has not yet is kept."""
    import time

    from streamlit.runtime.uploaded_file_manager import UploadedFile

    from app_pages._ui.server.background import session_id

    manager, session = _store(), session_id()
    stored = list(getattr(manager, "file_storage", {}).get(session, {})) if manager is not None else []
    if not stored:
        return
    held = set()
    for key in list(st.session_state.keys()):
        value = st.session_state.get(key)
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, UploadedFile):
                held.add(item.file_id)
    now = time.monotonic()
    for file_id in stored:
        if file_id in held:
            _unheld_since.pop((session, file_id), None)
        elif now - _unheld_since.setdefault((session, file_id), now) >= UNHELD_SECONDS:
            _forget(manager, session, file_id)
            _unheld_since.pop((session, file_id), None)


def _store():
    """Streamlit's uploaded-file manager of this server, or None outside one."""
    try:
        from streamlit.runtime import Runtime

        return Runtime.instance().uploaded_file_mgr if Runtime.exists() else None
    except Exception:  # noqa: BLE001 - the runtime is shutting down
        return None
