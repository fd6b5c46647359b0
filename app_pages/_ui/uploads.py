"""Uploaded files, kept as sources of their own beside the pasted text.

Streamlit's uploader forgets its files when its page is not shown, so it is used only to take
files in: each file it receives is kept here (name, bytes) and the uploader is emptied (a new
widget key). The Input page lists the kept files, each with its record count and a button that
removes it, records and all. Uploading a file again replaces the one of the same name.

``inputs.parse_input`` reads the pasted text and these files together (``fasta.parse_sources``).
"""

from __future__ import annotations

import dataclasses
import hashlib

import streamlit as st

from .policy import current_limits, hosted_mode

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


def files() -> tuple[Upload, ...]:
    """The kept files, in upload order."""
    return tuple(st.session_state.get(FILES, ()))


def uploader(**kwargs) -> None:
    """The file uploader; what it receives is kept and it is emptied for the next files."""
    key = f"_uploads_{st.session_state.get(_GENERATION, 0)}"
    st.file_uploader(accept_multiple_files=True, key=key, on_change=_take, args=(key,), **kwargs)


def _take(key: str) -> None:
    kept = {upload.name: upload for upload in files()}
    limits = current_limits()
    for file in st.session_state.get(key) or []:
        problem = limits.check_upload(file.size, "the file")
        data = b"" if problem else file.getvalue()
        kept.pop(file.name, None)  # a new upload of a name replaces the old one, at the end
        kept[file.name] = Upload(file.name, data, hashlib.sha256(data).hexdigest(), problem)
    st.session_state[FILES] = tuple(kept.values())[-MAX_FILES:]
    st.session_state[_GENERATION] = st.session_state.get(_GENERATION, 0) + 1


def remove(name: str) -> None:
    """Forget the kept file ``name`` (and so its records)."""
    st.session_state[FILES] = tuple(upload for upload in files() if upload.name != name)


def file_list(records_per_file: tuple[int, ...]) -> None:
    """Each kept file with its record count (or why it was not read) and a remove button."""
    for index, (upload, count) in enumerate(zip(files(), records_per_file, strict=True)):
        row = st.container(horizontal=True, vertical_alignment="center")
        with row:
            status = upload.problem or f"{count:,} record{'s' if count != 1 else ''}"
            st.text(f"{upload.name} · {status}")
            st.button("Remove", key=f"_remove_upload_{index}", on_click=remove, args=(upload.name,),
                      icon=":material/close:", help="Remove this file and its records")  # fmt: skip
