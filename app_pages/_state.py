"""What the pages share: session-state keys, the cached model, cached results, the link.

Results are cached with ``st.cache_data`` keyed by (model identifier, sequence, options), all
plain strings, ints and tuples, so they hash cheaply and are shared by every session. The model
is loaded once per process with ``st.cache_resource``; the engine is thread-safe.

Hosted mode (``FLAMINO_HOSTED=1``, see ``flamino_core.hosting``) tightens the input limits, offers
only the server's models (no local paths, no pickles), and runs heavy computations (masked scans,
attention and contacts of long sequences) through one bounded queue shared by all sessions.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import re
import threading
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from flamino_core import scores
from flamino_core.config import MAX_RESIDUES, PRESETS
from flamino_core.engine import Engine, enable_compilation_cache
from flamino_core.fasta import InputIssue, ParsedInput, ProteinRecord, parse_fasta_text
from flamino_core.figures import figure_html
from flamino_core.hosting import (
    HEAVY_RESIDUES,
    RANDOM_TEST_MODEL,
    QueueFull,
    current_limits,
    heavy_job_queue,
    hosted_mode,
)
from flamino_core.share import MAX_FASTA_CHARS, SharedView, decode_view, encode_view
from flamino_core.weights import ModelError, ModelWeights, cached_presets, default_model, load_weights

ASSETS = Path(__file__).resolve().parent.parent / "assets"
EXAMPLES = {  # button label -> file in assets/
    "Haemoglobin β (human)": "HBB_HUMAN.fa",
    "Ubiquitin (human)": "UBIQ_HUMAN.fa",
    "Two UniProt entries": "uniprot_two.fa",
}
RANDOM_LABEL = "untrained test model — random weights, output is not biology"
LOCAL_CHOICE = "local"
# Input limits for an interactive session (the CLI has none); hosted mode tightens them.
MAX_RECORDS = 200
MAX_RESIDUES_PER_RECORD = 5_000
MAX_TOTAL_RESIDUES = 100_000
MAX_LINK_CHARS = 8_000  # longer links are refused by some browsers and chat tools
# Results kept in memory are bounded by entry counts fixed at import: smaller on a shared
# server, where one attention entry of a 650M model at 1022 residues is ~85 MB.
HOSTED = hosted_mode()
LOG = logging.getLogger("flamino")

# Session-state keys. Page selections use the same names as the link's query keys.
FASTA = "fasta_text"
RECORD = "record"
MODEL = "model"
MODEL_CHOICE = "model_choice"
LOCAL_PATH = "local_path"
IMAGE_FORMAT = "image_format"
MODEL_FAILURES = "_model_failures"
PAGE_OPTIONS = {
    "input": (),
    "predictions": ("pos", "k", "scan"),
    "embeddings": ("elayer", "dims", "colour"),
    "attention": ("alayer", "head", "apc", "special"),
}


# --- selections that survive page switches ------------------------------------------------------
def keep(key: str, default, valid: Callable[[object], bool] = lambda value: True) -> str:
    """The widget key for the selection stored under ``key``.

    Streamlit forgets a widget's state when its page is not shown, so the value lives under
    ``key`` (also where a shared link puts it) and the widget under ``_w_<key>``, seeded from
    it. Call ``remember(key, value)`` with what the widget returned.
    """
    widget_key = f"_w_{key}"
    ss = st.session_state
    if widget_key not in ss or not valid(ss[widget_key]):
        value = ss.get(key, default)
        ss[widget_key] = value if valid(value) else default
    return widget_key


def seeded(key: str, default, valid: Callable[[object], bool] = lambda value: True, options=None) -> dict:
    """Keyword arguments (``key`` and ``index`` or ``value``) for a widget made with ``keep``.

    The widget's own default is the kept value too: a browser that sends a widget's default
    instead of its state (seen under load, when a rerun is requested before the widget has
    settled) then cannot silently reset the selection, e.g. switch the model to the first one.
    Pass ``options`` for a selectbox or radio.
    """
    widget_key = keep(key, default, valid)
    value = st.session_state[widget_key]
    if options is not None:
        return {"key": widget_key, "index": list(options).index(value)}
    return {"key": widget_key, "value": value}


def remember(key: str, value) -> None:
    st.session_state[key] = value


# --- session start and links --------------------------------------------------------------------
def init_session() -> None:
    """Defaults for a new session, then whatever its link carries (once per session)."""
    ss = st.session_state
    if "_initialised" in ss:
        return
    ss["_initialised"] = True
    ss.setdefault(FASTA, "")
    ss.setdefault(MODEL, default_model())
    ss.setdefault(IMAGE_FORMAT, "png")
    params = st.query_params.to_dict()
    if not params:
        return
    view = decode_view(params)
    if view is None:
        ss["_link_problem"] = (
            "This link could not be read (it may have been cut short when it was copied); "
            "starting with an empty input."
        )
        return
    apply_view(view)


def apply_view(view: SharedView) -> None:
    ss = st.session_state
    if view.fasta:
        ss[FASTA] = view.fasta
    if view.record:
        ss[RECORD] = view.record
    if view.model and current_limits().allowed_models is not None:
        if current_limits().check_model(view.model):
            ss["_link_problem"] = plain(
                f"The link asks for the model {view.model}, which this server does not offer; "
                f"using {ss[MODEL]} instead."
            )
        else:
            ss[MODEL] = view.model
    elif view.model:
        if (
            view.model in (RANDOM_TEST_MODEL, default_model())
            or view.model.removeprefix("facebook/") in PRESETS
        ):
            ss[MODEL] = view.model
        elif view.model.startswith("random:"):
            # Untrained copies of the big presets take many GB to build; a link is not enough.
            ss["_link_problem"] = plain(
                f"The link asks for {view.model}, an untrained test model of a large size; "
                f"using {ss[MODEL]} instead."
            )
        else:
            # A path on this server: pre-filled, but loaded only when the user asks, so a
            # link from someone else never makes the server open files by itself.
            ss[MODEL_CHOICE] = LOCAL_CHOICE
            ss[LOCAL_PATH] = view.model
    for key, value in view.options.items():
        ss[key] = value
    if view.page:
        ss["_link_page"] = view.page


def sync_input() -> None:
    """Take the text box's latest value before anything (the sidebar) reads the input.

    The sidebar is drawn before the page, so without this it would show the records of the
    previous input for one run after an edit.
    """
    widget_key = f"_w_{FASTA}"
    if widget_key in st.session_state:
        st.session_state[FASTA] = st.session_state[widget_key]


def take_link_page() -> str | None:
    """The page a link asked for, once."""
    return st.session_state.pop("_link_page", None)


def current_view(page: str) -> SharedView:
    """The view to put in the link: model, page, the page's selections and the input."""
    ss = st.session_state
    options = {key: ss.get(key) for key in PAGE_OPTIONS.get(page, ())}
    return SharedView(
        model=ss.get(MODEL),
        page=page,
        fasta=ss.get(FASTA) or None,
        record=ss.get(RECORD),
        options={k: v for k, v in options.items() if v is not None},
    )


def link_params(page: str) -> tuple[dict[str, str], str | None]:
    """Query parameters for the current view and a note when the input had to be shortened."""
    view = current_view(page)
    if view.fasta and len(view.fasta) > MAX_FASTA_CHARS:  # no link could carry it back
        params = None
    else:
        params = encode_view(view)
    if params is not None and len(urllib.parse.urlencode(params)) <= MAX_LINK_CHARS:
        return params, None
    record = selected_record()
    if record is not None:
        shortened = encode_view(_replace_fasta(view, f">{record.id}\n{record.sequence}\n"))
        if len(urllib.parse.urlencode(shortened)) <= MAX_LINK_CHARS:
            return shortened, "The input is too long for a link; the link carries only the selected record."
    return encode_view(_replace_fasta(view, None)), (
        "The input is too long for a link; the link carries the model and selections but no sequence."
    )


def _replace_fasta(view: SharedView, fasta: str | None) -> SharedView:
    return SharedView(view.model, view.page, fasta, view.record, view.options)


def publish_link(page: str, slot) -> None:
    """Keep the browser's address bar in sync with the view and show the link in ``slot``."""
    params, note = link_params(page)
    st.query_params.from_dict(params)
    base = st.context.url or ""
    with slot.container(), st.expander("Share this view", icon=":material/link:"):
        st.caption("Opening this link reproduces the page, model, selections and input.")
        st.code(f"{base}?{urllib.parse.urlencode(params)}", language=None, wrap_lines=True)
        if note:
            st.caption(note)


# --- input ----------------------------------------------------------------------------------------
def input_limits() -> dict[str, int]:
    """The validator's limits for this session: the app's own, tightened in hosted mode."""
    hosted = current_limits().fasta_limits()
    own = {
        "max_records": MAX_RECORDS,
        "max_residues_per_record": MAX_RESIDUES_PER_RECORD,
        "max_total_residues": MAX_TOTAL_RESIDUES,
    }
    return {key: value if hosted[key] is None else min(value, hosted[key]) for key, value in own.items()}


def upload_size_mb() -> int | None:
    """The upload cap the browser enforces in hosted mode (whole MB); the server checks too."""
    limit = current_limits().max_upload_bytes
    return None if limit is None else max(1, math.ceil(limit / 1e6))


@st.cache_data(show_spinner=False, max_entries=16 if HOSTED else 64)
def _parse(text: str, max_records: int, max_residues_per_record: int, max_total_residues: int) -> ParsedInput:
    return parse_fasta_text(
        text,
        max_records=max_records,
        max_residues_per_record=max_residues_per_record,
        max_total_residues=max_total_residues,
    )


def parse_input(text: str) -> ParsedInput:
    """The one validator, with this session's limits; pasted text, uploads and links all come here."""
    problem = current_limits().check_upload(len(text.encode("utf-8", "replace")), "the input")
    if problem:
        return ParsedInput((), (), (InputIssue(None, problem, "error"),))
    return _parse(text, **input_limits())


def parsed() -> ParsedInput | None:
    text = st.session_state.get(FASTA, "")
    return parse_input(text) if text.strip() else None


def records() -> tuple[ProteinRecord, ...]:
    result = parsed()
    return result.records if result else ()


def selected_record() -> ProteinRecord | None:
    found = records()
    if not found:
        return None
    chosen = st.session_state.get(RECORD)
    return next((r for r in found if r.id == chosen), found[0])


def record_picker() -> None:
    """Sidebar choice of the record the pages analyse (only when there are several)."""
    found = records()
    if not found:
        st.caption("No sequence yet: start on the Input page.")
        return
    ids = [r.id for r in found]
    lengths = {r.id: len(r.sequence) for r in found}
    if len(found) == 1:
        st.caption("Record")
        st.text(f"{ids[0]} ({lengths[ids[0]]} aa)")
        remember(RECORD, ids[0])
        return
    chosen = st.selectbox(
        f"Record ({len(found)} in the input)",
        ids,
        **seeded(RECORD, ids[0], lambda v: v in lengths, options=ids),
        format_func=lambda i: f"{i} ({lengths[i]} aa)",
    )
    remember(RECORD, chosen)


def set_input(text: str) -> None:
    """Replace the input (from a callback: the text box shows it on the next run)."""
    st.session_state[FASTA] = text
    st.session_state[f"_w_{FASTA}"] = text
    st.session_state.pop(RECORD, None)


def example_text(label: str) -> str:
    return (ASSETS / EXAMPLES[label]).read_text()


def to_fasta(records_: tuple[ProteinRecord, ...] | list[ProteinRecord]) -> str:
    lines = []
    for record in records_:
        header = f"{record.id} {record.description}".strip()
        lines.append(f">{header}")
        lines += [record.sequence[i : i + 60] for i in range(0, len(record.sequence), 60)]
    return "\n".join(lines) + "\n"


# --- plain text in Streamlit's markdown -------------------------------------------------------------
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=^&])")


def plain(text: str) -> str:
    """User text (ids, headers, messages quoting them) escaped so markdown shows it verbatim."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", str(text)).replace("\n", "  \n")


def show_issues(result: ParsedInput, limit: int = 25) -> None:
    """Errors and warnings from the validator, each naming its record (and position)."""
    sections = (
        (result.errors, st.error, "problem(s): these records or lines were not analysed"),
        (result.warnings, st.warning, "warning(s)"),
    )
    for issues, show, heading in sections:
        if not issues:
            continue
        lines = [f"- {plain(str(issue))}" for issue in issues[:limit]]
        if len(issues) > limit:
            lines.append(f"- … and {len(issues) - limit} more")
        show(f"**{len(issues)} {heading}**\n\n" + "\n".join(lines))


def record_caption(record: ProteinRecord) -> None:
    """The record's id, length and description, as plain text (headers are user input)."""
    parts = [record.id, f"{len(record.sequence)} residues", record.description]
    st.text("  ·  ".join(part for part in parts if part))


# --- the model --------------------------------------------------------------------------------------
def model_choices() -> list[str]:
    """What the model picker offers: everything locally, the server's models in hosted mode."""
    allowed = current_limits().allowed_models
    if allowed is None:
        return [*PRESETS, LOCAL_CHOICE, RANDOM_TEST_MODEL]
    return [p for p in PRESETS if p in allowed] + sorted(m for m in allowed if m not in PRESETS)


def model_label(identifier: str) -> str:
    cached = cached_presets()
    if identifier in PRESETS:
        layers, dim, heads, size = PRESETS[identifier]
        where = "cached" if identifier in cached else "download needed"
        return f"{identifier} · {size} params · {layers} layers · {where}"
    if identifier == LOCAL_CHOICE:
        return "Local checkpoint (folder or .pt file)…"
    if identifier.startswith("random:"):
        spec = identifier.removeprefix("random:")
        return RANDOM_LABEL if spec == "tiny" else f"{RANDOM_LABEL} ({spec})"
    if current_limits().allowed_models is not None:  # the operator's checkpoint: not its path
        return f"this server's model ({Path(identifier).name})"
    return identifier


def model_picker() -> None:
    """Sidebar controls choosing ``st.session_state[MODEL]``."""
    ss = st.session_state
    choices = model_choices()
    if LOCAL_CHOICE not in choices and ss[MODEL].removeprefix("facebook/") not in choices:
        ss[MODEL] = default_model()  # hosted: only the server's models, whatever came before
    active = ss[MODEL]
    if active.startswith("random:") and active not in choices and LOCAL_CHOICE in choices:
        choices.append(active)
    is_path = active not in choices and active.removeprefix("facebook/") not in PRESETS
    if active.removeprefix("facebook/") in PRESETS:
        default_choice = active.removeprefix("facebook/")
    else:
        default_choice = LOCAL_CHOICE if is_path else active
    if is_path:
        ss.setdefault(LOCAL_PATH, active)

    def choose() -> None:
        choice = ss[f"_w_{MODEL_CHOICE}"]
        if choice != LOCAL_CHOICE:
            ss[MODEL] = choice
            forget_failure(choice)  # choosing it again is asking to try again

    def load_path() -> None:
        path = ss[f"_w_{LOCAL_PATH}"].strip()
        ss[MODEL] = path
        forget_failure(path)

    choice = st.selectbox(
        "Model",
        choices,
        **seeded(MODEL_CHOICE, default_choice, lambda v: v in choices, options=choices),
        format_func=model_label,
        on_change=choose,
        help="ESM-2 checkpoints from fair-esm / Hugging Face, converted once and cached. "
        "Bigger models are slower and need more memory.",
    )
    remember(MODEL_CHOICE, choice)
    if choice == LOCAL_CHOICE:
        path = st.text_input(
            "Checkpoint path",
            **seeded(LOCAL_PATH, ""),
            placeholder="/data/esm2_t33_650M_UR50D.pt or an HF model folder",
        )
        remember(LOCAL_PATH, path)
        st.button("Load checkpoint", disabled=not path.strip(), on_click=load_path)
        if is_path:
            st.caption("In use:")
            st.text(active)


# Weights loaded with a visible progress bar, waiting for ``load_engine`` to wrap them. Loading
# happens outside the cached function on purpose: Streamlit records the elements a cached
# function draws and replays them on every later hit, which for a download's progress bar would
# mean hundreds of stale updates per run, forever.
_prepared: dict[str, ModelWeights] = {}
_ready: set[str] = set()  # identifiers load_engine has built an engine for
_prepare_lock = threading.Lock()


def _load_weights(identifier: str, progress=None) -> ModelWeights:
    """``load_weights`` under this server's policy: in hosted mode no server paths (except the
    operator's own ``FLAMINO_MODEL``) and never a pickle."""
    limits = current_limits()
    return load_weights(
        identifier,
        progress=progress,
        allow_local_paths=limits.allow_local_paths or identifier == os.environ.get("FLAMINO_MODEL"),
        allow_pickle=limits.allow_pickle,
    )


@st.cache_resource(show_spinner="Loading the model…", max_entries=2)
def load_engine(identifier: str) -> Engine:
    """The engine for a model identifier: built once per process and shared by all sessions
    (``st.cache_resource`` holds one instance per identifier; the engine is thread-safe and its
    jitted functions compile once per shape for the whole process)."""
    weights = _prepared.pop(identifier, None)
    if weights is None:
        with _prepare_lock:  # evicted and asked for again: one load at a time, as in _prepare
            weights = _prepared.pop(identifier, None) or _load_weights(identifier)
    enable_compilation_cache()
    engine = Engine(weights)
    _ready.add(identifier)
    return engine


def _prepare(identifier: str) -> None:
    """First use in this process: download, convert or restore the weights, showing progress."""
    if identifier in _ready:
        return
    slot = st.empty()
    shown = {"fraction": -1.0, "message": ""}

    def progress(fraction: float | None, message: str) -> None:
        if fraction is None:
            slot.info(plain(message), icon=":material/hourglass_top:")
        elif fraction - shown["fraction"] >= 0.01 or message != shown["message"] or fraction >= 1:
            slot.progress(min(max(fraction, 0.0), 1.0), text=plain(message))
        else:
            return
        shown.update(fraction=fraction if fraction is not None else -1.0, message=message)

    try:
        slot.info("Waiting for another session that is loading this model…", icon=":material/hourglass_top:")
        with _prepare_lock:  # one download per model, not one per session
            if identifier not in _ready and identifier not in _prepared:
                progress(None, f"Loading model {identifier}")
                _prepared[identifier] = _load_weights(identifier, progress=progress)
    finally:
        slot.empty()


def active_engine() -> tuple[Engine | None, str | None]:
    """The engine for the chosen model, or the loader's message for the user.

    A failure is remembered for the session (``st.cache_resource`` does not cache exceptions):
    offline, the Hub client retries for ~25 s, which must not happen again on every click.
    """
    identifier = st.session_state[MODEL]
    failures = st.session_state.setdefault(MODEL_FAILURES, {})
    if identifier in failures:
        return None, failures[identifier]
    refused = current_limits().check_model(identifier)
    if refused:
        failures[identifier] = refused[:1].upper() + refused[1:]
        return None, failures[identifier]
    try:
        _prepare(identifier)
        return load_engine(identifier), None
    except ModelError as err:
        failures[identifier] = str(err)
    except ValueError as err:  # a config the engine cannot build: still the user's model file
        failures[identifier] = f"Cannot use model {identifier!r}: {err}"
    except Exception as err:  # a dropped download, a full disk: say so, keep the app usable
        LOG.exception("loading model %s failed", identifier)
        failures[identifier] = (
            f"Loading {identifier} failed ({type(err).__name__}: {err}). "
            "This is often a network hiccup: try again in a minute."
        )
    return None, failures[identifier]


def forget_failure(identifier: str) -> None:
    st.session_state.get(MODEL_FAILURES, {}).pop(identifier, None)


def model_banner() -> Engine | None:
    """Load the chosen model; say clearly if it is the untrained one or cannot be loaded."""
    engine, problem = active_engine()
    if problem:
        st.error(
            "**The model could not be loaded.**\n\n" + plain(problem),
            icon=":material/error:",
        )
        st.button(
            "Try again", on_click=forget_failure, args=(st.session_state[MODEL],), icon=":material/refresh:"
        )
    elif engine.is_random:
        st.warning(
            f"**Untrained test model — random weights, output is not biology.** "
            f"Everything on these pages comes from a {engine.config.num_layers}-layer model "
            "with random parameters, for trying the interface offline. Choose an ESM-2 "
            "model in the sidebar for real predictions.",
            icon=":material/warning:",
        )
    return engine


def require_engine() -> Engine | None:
    engine, problem = active_engine()
    if engine is None:
        st.info("Choose a model that can be loaded in the sidebar to see this page.")
    return engine


def require_record() -> ProteinRecord | None:
    record = selected_record()
    if record is None:
        st.info("Start on the **Input** page: paste a sequence, upload FASTA or pick an example.")
        if st.button("Go to Input"):
            st.switch_page("app_pages/input.py")
    return record


def page_inputs():
    """(record, engine, model id, sequence, file stem) for an analysis page, or None when the
    record or the model is missing (the helpers above have then said what to do)."""
    record = require_record()
    engine = require_engine() if record else None
    if record is None or engine is None:
        return None
    return record, engine, model_id(), record.sequence, safe_name(record.id)


def model_id() -> str:
    return st.session_state[MODEL]


# --- heavy jobs -------------------------------------------------------------------------------------
@contextlib.contextmanager
def _heavy_slot(what: str):
    """Run the block in the process-wide heavy-job queue, showing the wait while there is one.

    Used inside cached functions (only a cache miss queues). Updating the note every few seconds
    is also what stops the wait of a session that was closed meanwhile: Streamlit interrupts a
    stopped script at its next element update.
    """
    queue = heavy_job_queue()
    note = st.empty()
    shown = [-1]

    def waiting(seconds: float) -> None:
        if int(seconds) // 5 == shown[0]:
            return
        shown[0] = int(seconds) // 5
        note.info(
            f"Waiting for a free slot for {what}: {queue.running} heavy job(s) running, "
            f"{queue.waiting} waiting ({seconds:.0f} s)…",
            icon=":material/hourglass_top:",
        )

    try:
        with queue.slot(on_wait=waiting):
            note.empty()
            yield
    except BaseException as exc:  # Streamlit's stop/rerun signals are BaseExceptions
        if type(exc).__name__ in ("StopException", "RerunException"):
            LOG.warning("heavy job abandoned (%s): its session closed or asked for something else", what)
        raise
    finally:
        note.empty()


def heavy(compute: Callable, *args, what: str):
    """``compute(*args)``, or None with a warning when the server is too busy to queue it."""
    try:
        return compute(*args)
    except QueueFull as err:
        st.warning(
            f"**The server is busy:** {what} was not computed this time ({plain(err)}). "
            "Everything else on the page works; change any option or reload to try again.",
            icon=":material/hourglass_top:",
        )
        return None


def _maybe_heavy(sequence: str, what: str):
    return _heavy_slot(what) if len(sequence) > HEAVY_RESIDUES else contextlib.nullcontext()


# --- cached results -----------------------------------------------------------------------------------
# Each takes the model identifier (not the engine) so results are keyed by model.
def _bar(text: str):
    """A progress bar for a slow cached computation, removed when it is done.

    It is drawn inside the cached function because Streamlit forbids drawing into outside
    elements there; the price is that Streamlit replays its updates on every cache hit. So it
    moves in steps of 5% at most (about 20 updates), and the final ``empty()`` leaves nothing.
    """
    bar = st.progress(0.0, text=text)
    last = [0.0]

    def update(done: int, total: int) -> None:
        fraction = done / max(total, 1)
        if fraction - last[0] >= 0.05 or done == total:
            bar.progress(fraction, text=f"{text} ({done}/{total} batches)")
            last[0] = fraction

    return bar, update


@st.cache_data(show_spinner="Running the model…", max_entries=64)
def logits(model: str, sequence: str) -> np.ndarray:
    """(L, 33) LM logits from one unmasked pass."""
    (out,) = load_engine(model).run([sequence], repr_layers=(), logits=True)
    return out.logits


@st.cache_data(show_spinner="Masking the position…", max_entries=256)
def masked_position(model: str, sequence: str, position: int) -> np.ndarray:
    """(33,) log-probabilities at 0-based ``position`` with that residue masked."""
    return load_engine(model).masked_log_probs(sequence, [position])[0]


@st.cache_data(show_spinner=False, max_entries=32)
def masked_scan(model: str, sequence: str) -> np.ndarray:
    """(L, 33) log-probabilities with each position masked in turn: L forward passes (queued)."""
    with _heavy_slot("the masked scan"):
        bar, update = _bar(f"Masking each of the {len(sequence)} positions")
        try:
            return load_engine(model).masked_log_probs(sequence, progress=update)
        finally:
            bar.empty()


@st.cache_data(show_spinner="Scoring substitutions…", max_entries=64)
def wt_marginal_scores(model: str, sequence: str) -> np.ndarray:
    return scores.wt_marginals(load_engine(model), sequence)


@st.cache_data(show_spinner="Computing embeddings…", max_entries=16 if HOSTED else 64)
def representations(model: str, sequence: str, layer: int) -> np.ndarray:
    """(L, D) hidden states after ``layer`` (0 = token embeddings)."""
    (out,) = load_engine(model).run([sequence], repr_layers=(layer,), logits=False)
    return out.representations[layer]


@st.cache_data(show_spinner=False, max_entries=32)
def mean_embeddings(model: str, sequences: tuple[str, ...], layer: int) -> np.ndarray:
    """(N, D) per-sequence embeddings: each sequence's ``layer`` states averaged over residues."""
    bar, update = _bar(f"Embedding {len(sequences)} sequences")
    try:
        outs = load_engine(model).run(list(sequences), repr_layers=(layer,), logits=False, progress=update)
    finally:
        bar.empty()
    return np.stack([out.representations[layer].mean(axis=0) for out in outs])


@st.cache_data(show_spinner="Computing attention maps…", max_entries=4 if HOSTED else 8)
def attention(model: str, sequence: str, layer: int) -> np.ndarray:
    """(H, T, T) attention of one layer, T = residues + 2 (with ``<cls>``/``<eos>``).

    Only this layer's maps are materialised. Longer than 1022 residues: the first 1022
    (maps cannot be stitched from windows). Long sequences are queued.
    """
    long = "truncate" if len(sequence) > MAX_RESIDUES else "window"
    with _maybe_heavy(sequence, "the attention maps"):
        (out,) = load_engine(model).run(
            [sequence], repr_layers=(), logits=False, attention_layers=(layer,), long=long
        )
    return out.attentions[0]


@st.cache_data(
    show_spinner="Predicting contacts (needs every layer's attention)…", max_entries=8 if HOSTED else 16
)
def contacts(model: str, sequence: str) -> np.ndarray:
    """(L, L) contact probabilities; long sequences in overlapping windows (and queued)."""
    with _maybe_heavy(sequence, "the contact map"):
        (out,) = load_engine(model).run([sequence], repr_layers=(), logits=False, contacts=True, long="window")
    return out.contacts


# --- figures and downloads ------------------------------------------------------------------------------
def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_.")[:60] or "record"


def show_figure(fig, key: str, file_stem: str):
    """The figure, its PNG/SVG via the camera button, and an HTML download (built on click).

    Returns the row holding the download button, so callers can put their data downloads
    beside it (``with row: csv_button(...)``).
    """
    fmt = st.session_state.get(IMAGE_FORMAT, "png")
    st.plotly_chart(
        fig,
        key=key,
        theme=None,
        config={
            "displaylogo": False,
            "toImageButtonOptions": {"format": fmt, "filename": file_stem, "scale": 2},
        },
    )
    row = st.container(horizontal=True)
    with row:
        st.download_button(
            "Figure (HTML)",
            data=lambda: figure_html(fig),
            file_name=f"{file_stem}.html",
            mime="text/html",
            key=f"{key}_html",
            on_click="ignore",
            icon=":material/download:",
        )
    return row


def csv_button(label: str, make_frame: Callable[[], pd.DataFrame], file_name: str, key: str) -> None:
    st.download_button(
        label,
        data=lambda: make_frame().to_csv(index=False).encode("utf-8"),
        file_name=file_name,
        mime="text/csv",
        key=key,
        on_click="ignore",
        icon=":material/download:",
    )


def npz_button(label: str, arrays: Callable[[], dict[str, np.ndarray]], file_name: str, key: str) -> None:
    def build() -> bytes:
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays())
        return buffer.getvalue()

    st.download_button(
        label,
        data=build,
        file_name=file_name,
        mime="application/octet-stream",
        key=key,
        on_click="ignore",
        icon=":material/download:",
    )


def layer_names(num_layers: int, first: int = 0) -> dict[int, str]:
    names = {layer: f"layer {layer}" for layer in range(first, num_layers + 1)}
    if first == 0:
        names[0] = "layer 0 (token embeddings)"
    names[num_layers] = f"layer {num_layers} (final)"
    return names
