"""Shareable links: the app's view (model, page, selections, input) as URL query parameters.

App policy, not core: only the app writes and reads links (the CLI and ``flamino batch`` never
do), and what a link may carry is the app's own pages and their options, declared in
``views.py``. So the codec lives here, beside the code that publishes and applies links
(``session.py``).

The input FASTA travels compressed (zlib, then unpadded base64url) in ``fasta``; a plain
residue string in ``seq`` is accepted too, for links written by hand. Decoding treats the query
string as untrusted: every value is checked and bounded, and garbage gives None, never an
exception. Which model a link may switch to is not decided here but in ``policy.py``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
import zlib
from collections.abc import Mapping

from app_pages._ui.frame.views import OPTIONS, PAGES

MAX_FASTA_CHARS = 200_000  # decompressed; bounds a decompression bomb
MAX_TOKEN_CHARS = 60_000  # compressed and encoded
MAX_MODEL_CHARS = 500
MAX_RECORD_CHARS = 100  # fasta.MAX_ID_CHARS

_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")
_PLAIN_SEQUENCE = re.compile(r"[A-Za-z]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@dataclasses.dataclass(frozen=True)
class SharedView:
    """What a link restores. Fields a link does not carry are None (options: absent keys)."""

    model: str | None = None
    page: str | None = None
    fasta: str | None = None
    record: str | None = None
    options: dict[str, object] = dataclasses.field(default_factory=dict)


# --- the sequence payload -------------------------------------------------------------------
def encode_fasta(text: str) -> str:
    """FASTA text as a compact URL-safe token: zlib, then base64url without padding."""
    packed = zlib.compress(text.encode("utf-8"), 9)
    return base64.urlsafe_b64encode(packed).decode("ascii").rstrip("=")


def decode_fasta(token: str) -> str | None:
    """The FASTA text in a token from ``encode_fasta``, or None if it is not a valid one."""
    if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN_CHARS:
        return None
    if not _BASE64URL.fullmatch(token) or len(token) % 4 == 1:
        return None
    try:
        packed = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        inflater = zlib.decompressobj()
        # Bounded: at most MAX_FASTA_CHARS * 4 bytes (UTF-8) come out, whatever the token says.
        data = inflater.decompress(packed, MAX_FASTA_CHARS * 4 + 1)
        if not inflater.eof or inflater.unused_data or inflater.unconsumed_tail:
            return None  # truncated, trailing garbage, or larger than the bound
        text = data.decode("utf-8")
    except (binascii.Error, ValueError, zlib.error, UnicodeDecodeError):
        return None
    if not text.strip() or len(text) > MAX_FASTA_CHARS or "\x00" in text:
        return None
    return text


# --- whole views --------------------------------------------------------------------------------
def encode_view(view: SharedView) -> dict[str, str]:
    """Query parameters for a view; options with a None value are left out.

    Raises:
      ValueError: an option key or value that ``decode_view`` would refuse (a programming error).
    """
    params: dict[str, str] = {}
    if view.model:
        params["model"] = view.model
    if view.page:
        if view.page not in PAGES:
            raise ValueError(f"unknown page {view.page!r}; pages are {tuple(PAGES)}")
        params["page"] = view.page
    if view.record:
        params["record"] = view.record
    for key, value in view.options.items():
        if value is None:
            continue
        if key not in OPTIONS:
            raise ValueError(f"unknown view option {key!r}")
        kind = OPTIONS[key].kind
        if not kind.valid(value) or kind.parse(kind.format(value)) != value:
            raise ValueError(f"option {key}={value!r} would not survive decoding")
        params[key] = kind.format(value)
    if view.fasta:
        params["fasta"] = encode_fasta(view.fasta)
    return params


def decode_view(params: Mapping[str, object]) -> SharedView | None:
    """The view carried by a query string, or None if it carries nothing usable.

    Args:
      params: query parameters as Streamlit gives them (str values, or lists for repeated keys:
        the last value wins, as ``st.query_params`` does).

    Returns:
      None when no recognised key has a valid value, or when the link's sequence is present but
      corrupt (a link whose sequence cannot be read must not silently show another one).
      Otherwise a ``SharedView`` with every invalid field dropped.
    """
    try:
        values = {key: _last(value) for key, value in dict(params).items()}
    except (TypeError, ValueError):
        return None
    values = {k: v for k, v in values.items() if isinstance(k, str) and isinstance(v, str)}

    fasta = None
    if "fasta" in values:
        fasta = decode_fasta(values["fasta"])
        if fasta is None:
            return None
    elif "seq" in values:
        seq = values["seq"]
        if not (_PLAIN_SEQUENCE.fullmatch(seq) and len(seq) <= MAX_FASTA_CHARS):
            return None
        fasta = seq

    model = _text(values.get("model"), MAX_MODEL_CHARS)
    record = _text(values.get("record"), MAX_RECORD_CHARS)
    page = values.get("page") if values.get("page") in PAGES else None
    options = {}
    for key, option in OPTIONS.items():
        if key in values:
            value = option.kind.parse(values[key])
            if value is not None:
                options[key] = value
    if not (fasta or model or record or page or options):
        return None
    return SharedView(model=model, page=page, fasta=fasta, record=record, options=options)


def _last(value: object) -> object:
    if isinstance(value, (list, tuple)):
        return value[-1] if value else None
    return value


def _text(value: str | None, limit: int) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if not value or len(value) > limit or _CONTROL.search(value):
        return None
    return value
