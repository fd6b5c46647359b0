"""Kept widgets (selections that survive page switches and come back from links), and user text.

Streamlit forgets a widget's state when its page is not shown, so a kept value lives in session
state under ``key`` (where a link puts it too) and its widget under ``_w_<key>``, seeded from it.
Each ``kept_*`` helper seeds the widget, draws it and keeps what it returns, so a page declares
a widget once. For a key registered in ``views.OPTIONS`` the option supplies the default, the
choices and their labels, the bounds, and the check a kept value must still pass; a value that
no longer fits (position 300 after switching to a 76-residue record) falls back to the default.

The widget's own default is the kept value too: a browser that sends a widget's default instead
of its state (seen under load, when a rerun is requested before the widget has settled) then
cannot silently reset the selection, e.g. switch the model to the first one. Streamlit warns
about a widget given both a session-state key and a default; ``.streamlit/config.toml`` turns
that expected warning off.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import streamlit as st

from app_pages._ui.frame.views import OPTIONS, Choice, Integer

Valid = Callable[[object], bool]


def widget_key(key: str) -> str:
    """Where the widget of the kept value ``key`` holds its own state (tests address it too)."""
    return f"_w_{key}"


def _draw(
    widget: Callable, key: str, default: object, valid: Valid, choices: list | None = None, shift: int = 0, **kwargs
):
    """Seed the widget from the kept value (or ``default``), draw it, keep what it returns.

    ``shift`` (numbers only): the widget shows ``value + shift`` (a position in the sequence's
    own numbering) while the kept value, and the link, stay ``value`` (where the residue is).
    When the shift changes (another first-residue number) the widget follows the residue.
    """
    option = OPTIONS.get(key)
    if option is not None and default is None:
        default = option.default

    def keepable(value: object) -> bool:
        return valid(value) and (option is None or option.kind.valid(value))

    ss = st.session_state
    held = widget_key(key)
    shift_held = f"{held}:shift"
    if held not in ss or ss.get(shift_held, 0) != shift or not keepable(_shifted(ss[held], -shift)):
        value = ss.get(key, default)
        ss[held] = _shifted(value if keepable(value) else default, shift)
        if shift or shift_held in ss:
            ss[shift_held] = shift
    if choices is None:
        kwargs["value"] = ss[held]
    else:
        kwargs["index"] = choices.index(ss[held])
    ss[key] = _shifted(widget(key=held, **kwargs), -shift)
    return ss[key]


def _shifted(value: object, shift: int) -> object:
    return value + shift if shift and isinstance(value, int) and not isinstance(value, bool) else value


def _choices(widget: Callable, label: str, key: str, options, default, format_func, **kwargs):
    option = OPTIONS.get(key)
    if option is not None and isinstance(option.kind, Choice):
        options = option.kind.labels if options is None else options
        format_func = format_func or option.kind.labels.get
    choices = list(options)
    return _draw(
        widget,
        key,
        default,
        lambda value: value in choices,
        choices,
        label=label,
        options=choices,
        format_func=format_func or str,
        **kwargs,
    )


def kept_selectbox(label: str, key: str, options: Iterable | None = None, *, default=None, format_func=None, **kwargs):
    """A kept ``st.selectbox``.

    Args:
      label: the widget's label.
      key: where the value is kept in session state (and, for a ``views.OPTIONS`` key, the
        link's query key).
      options: the choices; default: those of the registered ``Choice``.
      default: the value when nothing valid is kept; default: the registered option's.
      format_func: how a choice is shown; default: the registered ``Choice``'s labels.
      **kwargs: passed to ``st.selectbox`` (``help``, ``on_change`` ...).

    Returns:
      The selected value, also kept under ``key``. The other ``kept_*`` helpers work alike.
    """
    return _choices(st.selectbox, label, key, options, default, format_func, **kwargs)


def kept_radio(label: str, key: str, options: Iterable | None = None, *, default=None, format_func=None, **kwargs):
    """A kept ``st.radio``; ``options`` and labels default to a registered ``Choice``'s."""
    return _choices(st.radio, label, key, options, default, format_func, **kwargs)


def kept_multiselect(label: str, key: str, options: Iterable, *, format_func=None, **kwargs) -> list:
    """A kept ``st.multiselect``: the values chosen (a list), kept across page switches; those no
    longer offered (another model in the sidebar) are dropped. Its default is the kept list."""
    choices = list(options)
    ss = st.session_state
    held = widget_key(key)
    kept = [value for value in ss.get(held, ss.get(key, [])) if value in choices]
    ss[held] = kept
    ss[key] = list(st.multiselect(label, choices, default=kept, key=held, format_func=format_func or str, **kwargs))
    return ss[key]


def kept_number_input(
    label: str,
    key: str,
    *,
    min_value: int | None = None,
    max_value: int | None = None,
    default: int | None = None,
    step: int = 1,
    shift: int = 0,
    **kwargs,
) -> int:
    """A kept whole-number ``st.number_input``; bounds default to a registered ``Integer``'s.

    ``shift``: the widget shows (and takes) ``value + shift``, e.g. a position in the sequence's
    numbering, while the kept value and the link keep the 1-based index (see ``_draw``).
    """
    option = OPTIONS.get(key)
    if option is not None and isinstance(option.kind, Integer):
        min_value = option.kind.low if min_value is None else min_value
        max_value = option.kind.high if max_value is None else max_value

    def within(value: object) -> bool:
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and (min_value is None or value >= min_value)
            and (max_value is None or value <= max_value)
        )

    return _draw(
        st.number_input,
        key,
        default,
        within,
        shift=shift,
        label=label,
        min_value=None if min_value is None else min_value + shift,
        max_value=None if max_value is None else max_value + shift,
        step=step,
        **kwargs,
    )


def kept_span(
    labels: tuple[str, str], key: str, length: int, *, default: tuple[int, int], shift: int = 0, **kwargs
) -> tuple[int, int]:
    """Two kept number inputs, first and last residue, for a ``Span`` option (1-based, inclusive).

    The inputs show residue numbers (index + ``shift``); the kept value is the index pair. A
    first residue after the last one is read as the two swapped.
    """
    ss = st.session_state
    kept = ss.get(key)
    if not (OPTIONS[key].kind.valid(kept) and kept[1] <= length):
        kept = default
    parts = []
    for index, (column, label, part) in enumerate(zip(st.columns(2), labels, ("start", "end"), strict=True)):
        part_key = f"{key}_{part}"
        ss[part_key] = kept[index]
        with column:
            parts.append(kept_number_input(
                label, part_key, min_value=1, max_value=length, default=kept[index], shift=shift, **kwargs
            ))
    ss[key] = (min(parts), max(parts))
    return ss[key]


def kept_toggle(label: str, key: str, *, default: bool | None = None, **kwargs) -> bool:
    """A kept ``st.toggle``."""
    return _draw(st.toggle, key, default, lambda value: isinstance(value, bool), label=label, **kwargs)


def kept_checkbox(label: str, key: str, *, default: bool | None = None, **kwargs) -> bool:
    """A kept ``st.checkbox``."""
    return _draw(st.checkbox, key, default, lambda value: isinstance(value, bool), label=label, **kwargs)


def kept_float_input(label: str, key: str, *, default: float = 0.0, step: float = 0.1, **kwargs) -> float:
    """A kept ``st.number_input`` of a real number (a threshold)."""
    def finite(value: object) -> bool:
        return isinstance(value, float) and value == value and abs(value) != float("inf")

    return _draw(st.number_input, key, float(default), finite, label=label, step=float(step), **kwargs)


def kept_text_input(label: str, key: str, *, default: str = "", **kwargs) -> str:
    """A kept ``st.text_input``."""
    return _draw(st.text_input, key, default, lambda value: isinstance(value, str), label=label, **kwargs)


def kept_text_area(label: str, key: str, *, default: str = "", **kwargs) -> str:
    """A kept ``st.text_area``."""
    return _draw(st.text_area, key, default, lambda value: isinstance(value, str), label=label, **kwargs)


def layer_names(num_layers: int, first: int = 0) -> dict[int, str]:
    """Labels of the layers ``first..num_layers`` for a layer picker."""
    names = {layer: f"layer {layer}" for layer in range(first, num_layers + 1)}
    if first == 0:
        names[0] = "layer 0 (token embeddings)"
    names[num_layers] = f"layer {num_layers} (final)"
    return names


# --- user text in Streamlit's markdown ----------------------------------------------------------
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$=^&])")


def plain(text: str) -> str:
    """User text (ids, headers, cells, file names, messages quoting them) escaped so markdown
    shows it verbatim: the one escape path for visitor text in every markdown element (messages,
    captions, progress text, labels).

    Markdown's own characters get a backslash. ``:`` and ``@`` become character references,
    which show as themselves but leave no ``https://``, ``user@host`` or ``:icon:`` in the
    source: GitHub-flavoured markdown (Streamlit's) turns those into live links (a header
    ``https://evil.example`` was a clickable link) and icons whatever the backslashes.
    """
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", str(text))
    return escaped.replace(":", "&#58;").replace("@", "&#64;").replace("\n", "  \n")


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 residue``, ``2,554 residues``: a count with its noun in the right number."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def residues(n: int) -> str:
    return counted(n, "residue")
