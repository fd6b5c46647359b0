"""The session's model: the sidebar picker, loading with visible progress, failures, the banner.

The model is loaded once per process (``st.cache_resource``) and shared by all sessions; the
engine is thread-safe. ``flamino_core.engine`` and ``flamino_core.weights`` import JAX and Flax,
so they are imported inside the functions that load a model, never when a page is imported.
What this server may load is decided in ``policy.py``.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

import streamlit as st

from flamino_core.config import PRESETS
from flamino_core.fasta import ProteinRecord

from .downloads import safe_name
from .inputs import require_record
from .policy import RANDOM_TEST_MODEL, current_limits, hosted_mode, offered_now, public_model_name, weights_permissions
from .widgets import kept_selectbox, kept_text_input, plain, widget_key

if TYPE_CHECKING:
    from flamino_core.engine import Engine
    from flamino_core.weights import ModelWeights

LOG = logging.getLogger("flamino")
RANDOM_LABEL = "untrained test model"  # the picker's label; the banner says the rest
UNAVAILABLE = (  # hosted: what a visitor hears when a model fails to load (the log has the details)
    "This model cannot be loaded on this server right now. Choose another model in the sidebar, "
    "or try again later."
)
LOCAL_CHOICE = "local"  # the picker's entry for a checkpoint on this machine
# Session-state keys (``model`` is also the link's query key).
MODEL = "model"
MODEL_CHOICE = "model_choice"
LOCAL_PATH = "local_path"
MODEL_FAILURES = "_model_failures"


# --- the picker -------------------------------------------------------------------------------
def model_choices() -> list[str]:
    """What the model picker offers: everything locally, the server's models in hosted mode."""
    allowed = current_limits().allowed_models
    if allowed is None:
        return [*PRESETS, LOCAL_CHOICE, RANDOM_TEST_MODEL]
    listed = [p for p in PRESETS if p in allowed] + sorted(m for m in allowed if m not in PRESETS)
    return offered_now(listed)  # an offline server offers only what it has


def model_label(identifier: str) -> str:
    """The picker's short label (the sidebar cuts long ones off); ``model_details`` says more."""
    if identifier in PRESETS:
        size = PRESETS[identifier][3]
        return f"{identifier} · {size}"
    if identifier == LOCAL_CHOICE:
        return "Local checkpoint…"
    if identifier.startswith("random:"):
        spec = identifier.removeprefix("random:")
        return RANDOM_LABEL if spec == "tiny" else f"{RANDOM_LABEL} ({spec})"
    if current_limits().allowed_models is not None:  # the operator's checkpoint: not its path
        return f"this server's model ({public_model_name(identifier, current_limits())})"
    return identifier


def model_details(identifier: str) -> str | None:
    """One line under the picker about the chosen model: its size, and whether it is here."""
    if identifier in PRESETS:
        from flamino_core.weights import cached_presets

        layers, _, _, size = PRESETS[identifier]
        if hosted_mode():
            where = "on this server"
        else:
            where = "cached" if identifier in cached_presets() else "download needed (once, from the Hugging Face Hub)"
        return f"ESM-2, {size} parameters, {layers} layers · {where}"
    if identifier.startswith("random:"):
        return "Random weights, for trying the interface: its output is not biology."
    if identifier == LOCAL_CHOICE:
        return "A folder (Hugging Face or flamino checkpoint) or a fair-esm .pt file on this machine."
    return None


def model_picker() -> None:
    """Sidebar controls choosing ``st.session_state[MODEL]``."""
    from flamino_core.weights import default_model

    ss = st.session_state
    choices = model_choices()
    if LOCAL_CHOICE not in choices and ss[MODEL].removeprefix("facebook/") not in choices:
        # Hosted: only the server's models that can load now, whatever came before.
        ss[MODEL] = default_model() if default_model() in choices else (choices or [RANDOM_TEST_MODEL])[0]
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
        choice = ss[widget_key(MODEL_CHOICE)]
        if choice != LOCAL_CHOICE:
            ss[MODEL] = choice
            forget_failure(choice)  # choosing it again is asking to try again

    def load_path() -> None:
        path = ss[widget_key(LOCAL_PATH)].strip()
        ss[MODEL] = path
        forget_failure(path)

    choice = kept_selectbox(
        "Model",
        MODEL_CHOICE,
        choices,
        default=default_choice,
        format_func=model_label,
        on_change=choose,
        help="ESM-2 checkpoints from fair-esm / Hugging Face, converted once and cached. "
        "Bigger models are slower and need more memory.",
    )
    details = model_details(choice)
    if details:
        st.caption(details)
    if choice == LOCAL_CHOICE:
        path = kept_text_input(
            "Checkpoint path", LOCAL_PATH, placeholder="/data/esm2_t33_650M_UR50D.pt or an HF model folder"
        )
        st.button("Load checkpoint", disabled=not path.strip(), on_click=load_path)
        if is_path:
            st.caption("In use:")
            st.text(active)


# --- loading ------------------------------------------------------------------------------------
# Weights loaded with a visible progress bar, waiting for ``load_engine`` to wrap them. Loading
# happens outside the cached function on purpose: Streamlit records the elements a cached
# function draws and replays them on every later hit, which for a download's progress bar would
# mean hundreds of stale updates per run, forever.
_prepared: dict[str, ModelWeights] = {}
_ready: set[str] = set()  # identifiers load_engine has built an engine for
_prepare_lock = threading.Lock()


def _load_weights(identifier: str, progress=None) -> ModelWeights:
    """``load_weights`` under this server's policy (no server paths or pickles when hosted)."""
    from flamino_core import weights

    return weights.load_weights(identifier, progress=progress, **weights_permissions(identifier, current_limits()))


@st.cache_resource(show_spinner="Loading the model…", max_entries=2)
def load_engine(identifier: str) -> Engine:
    """The engine for a model identifier: built once per process and shared by all sessions
    (``st.cache_resource`` holds one instance per identifier; the engine is thread-safe and its
    jitted functions compile once per shape for the whole process)."""
    from flamino_core import engine

    weights = _prepared.pop(identifier, None)
    if weights is None:
        with _prepare_lock:  # evicted and asked for again: one load at a time, as in _prepare
            weights = _prepared.pop(identifier, None) or _load_weights(identifier)
    engine.enable_compilation_cache()
    built = engine.Engine(weights)
    _ready.add(identifier)
    return built


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
                progress(None, f"Loading model {public_model_name(identifier, current_limits())}")
                _prepared[identifier] = _load_weights(identifier, progress=progress)
    finally:
        slot.empty()


def active_engine() -> tuple[Engine | None, str | None]:
    """The engine for the chosen model, or the loader's message for the user.

    A failure is remembered for the session (``st.cache_resource`` does not cache exceptions):
    offline, the Hub client retries for ~25 s, which must not happen again on every click.
    """
    from flamino_core.weights import ModelError

    identifier = model_id()
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
    if hosted_mode():  # the message may name server paths and the operator's to-do: log only
        LOG.warning("hosted mode: model %s could not be loaded: %s", identifier, failures[identifier])
        failures[identifier] = UNAVAILABLE
    return None, failures[identifier]


def forget_failure(identifier: str) -> None:
    st.session_state.get(MODEL_FAILURES, {}).pop(identifier, None)


def model_id() -> str:
    return st.session_state[MODEL]


# --- what the pages see -------------------------------------------------------------------------
def model_banner() -> Engine | None:
    """Load the chosen model; say clearly if it is the untrained one or cannot be loaded."""
    engine, problem = active_engine()
    if problem:
        st.error("**The model could not be loaded.**\n\n" + plain(problem), icon=":material/error:")
        st.button("Try again", on_click=forget_failure, args=(model_id(),), icon=":material/refresh:")
    elif engine.is_random:
        st.warning(
            f"**Untrained test model — random weights, output is not biology.** "
            f"Everything on these pages comes from a {engine.config.num_layers}-layer model "
            "with random parameters, for trying the interface offline. Choose an ESM-2 "
            "model in the sidebar for real predictions.",
            icon=":material/warning:",
        )
    return engine


def page_inputs() -> tuple[ProteinRecord, Engine, str, str, str] | None:
    """(record, engine, model id, sequence, file stem) for an analysis page, or None when the
    record or the model is missing (the page has then said what to do)."""
    record = require_record()
    engine = active_engine()[0] if record else None
    if record is not None and engine is None:
        st.info("Choose a model that can be loaded in the sidebar to see this page.")
    if record is None or engine is None:
        return None
    return record, engine, model_id(), record.sequence, safe_name(record.id)
