"""The session's model: loading with visible progress, failures, the banner (the sidebar's
picker is ``model_picker.py``).

The model is loaded once per process (``st.cache_resource``) and shared by all sessions; the
engine is thread-safe. ``flamino_core.engine.engine`` and ``flamino_core.weights.loading`` import JAX and Flax,
so they are imported inside the functions that load a model, never when a page is imported.
What this server may load is decided in ``policy.py``.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

import streamlit as st

from flamino_core.model import FAMILIES, ModelId, PRESETS
from flamino_core.options import Precision
from flamino_core.wording import with_article

from app_pages._ui.server.policy import (RANDOM_TEST_MODEL, current_limits, hosted_mode, offered_now, public_model_name,
                                         weights_permissions, without_paths)
from app_pages._ui.frame.widgets import plain

if TYPE_CHECKING:
    from flamino_core.engine import Engine
    from flamino_core.weights import ModelWeights

LOG = logging.getLogger("flamino")
UNAVAILABLE = (  # hosted: what a visitor hears when a model fails to load (the log has the details)
    "This model cannot be loaded on this server right now. Choose another model in the sidebar, "
    "or try again later."
)
# Session-state keys (``model`` is also the link's query key; the picker's own are in model_picker).
MODEL = "model"
LOCAL_CHOICE = "local"  # model_picker's entry for a checkpoint on this machine (not a model)
MODEL_FAILURES = "_model_failures"


# --- loading ------------------------------------------------------------------------------------
# Weights loaded with a visible progress bar, waiting for ``load_engine`` to wrap them. Loading
# happens outside the cached function on purpose: Streamlit records the elements a cached
# function draws and replays them on every later hit, which for a download's progress bar would
# mean hundreds of stale updates per run, forever.
_prepared: dict[ModelId, ModelWeights] = {}
_ready: set[ModelId] = set()  # models load_engine has built an engine for
_prepare_lock = threading.Lock()


def _load_weights(model: ModelId, progress=None) -> ModelWeights:
    """``load_weights`` under this server's policy (no server paths or pickles when hosted)."""
    from flamino_core.weights import loading as weights

    return weights.load_weights(model, progress=progress, **weights_permissions(model, current_limits()))


@st.cache_resource(show_spinner="Loading the model…", max_entries=2)
def load_engine(model: ModelId) -> Engine:
    """The engine for a model: built once per process and shared by all sessions
    (``st.cache_resource`` holds one instance per identifier; the engine is thread-safe and its
    jitted functions compile once per shape for the whole process)."""
    from flamino_core.engine import engine

    weights = _prepared.pop(model, None)
    if weights is None:
        with _prepare_lock:  # evicted and asked for again: one load at a time, as in _prepare
            weights = _prepared.pop(model, None) or _load_weights(model)
    engine.enable_compilation_cache()
    built = engine.Engine(weights)
    _ready.add(model)
    return built


def _prepare(model: ModelId) -> None:
    """First use in this process: download, convert or restore the weights, showing progress."""
    if model in _ready:
        return
    slot = st.empty()
    shown = {"fraction": -1.0, "message": ""}

    def progress(fraction: float | None, message: str) -> None:
        message = without_paths(message)  # "Cache entry /srv/... is damaged": no server path hosted
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
            if model not in _ready and model not in _prepared:
                progress(None, f"Loading model {public_model_name(model.text, current_limits())}")
                _prepared[model] = _load_weights(model, progress=progress)
    finally:
        slot.empty()


def active_engine(model: ModelId) -> tuple[Engine | None, str | None]:
    """The engine for the chosen model (``context.build`` reads it), or the loader's message for the user.

    A failure is remembered for the session (``st.cache_resource`` does not cache exceptions):
    offline, the Hub client retries for ~25 s, which must not happen again on every click.
    """
    from flamino_core.engine import PrecisionRefused, refuse_precision
    from flamino_core.weights import ModelError

    identifier = model.text
    failures = st.session_state.setdefault(MODEL_FAILURES, {})
    if identifier in failures:
        return None, failures[identifier]
    refused = current_limits().check_model(model)
    if refused:
        failures[identifier] = refused[:1].upper() + refused[1:]
        return None, failures[identifier]
    try:
        # The server's precision ($FLAMINO_PRECISION) refused before any download: bf16 on a CPU
        # that would only emulate it (the message says why and what to set instead).
        refuse_precision()
        _prepare(model)
        return load_engine(model), None
    except (ModelError, PrecisionRefused) as err:
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
def model_banner(model: ModelId, engine: Engine | None, problem: str | None, engine_slot=None) -> None:
    """Say clearly if the chosen model (``active_engine``'s answer, looked up once per rerun by
    ``context.build``) is the untrained one or cannot be loaded.

    ``engine_slot`` (a placeholder under the sidebar's model picker) is told how the model
    runs: the attention path (fused C++ kernel or pure JAX, and why), precision, packing."""
    if engine is not None and engine_slot is not None:
        with engine_slot.container():
            read_as = checkpoint_details(engine.config, model)
            if read_as:
                st.caption(plain(read_as))
            st.caption(plain(without_paths(f"Runs on {engine.backend.describe()}")))
    if problem:
        st.error("**The model could not be loaded.**\n\n" + plain(problem), icon=":material/error:")
        row = st.container(horizontal=True)
        row.button("Try again", on_click=forget_failure, args=(model.text,), icon=":material/refresh:")
        if model.text != RANDOM_TEST_MODEL and RANDOM_TEST_MODEL in model_choices():
            row.button("Try the interface with the untrained test model", on_click=_use_test_model,
                       icon=":material/science:")
            st.caption("Meanwhile the untrained test model (random weights: its output is not biology) lets you "
                       "try every page offline.")
    elif engine.is_random:
        st.warning(
            f"**Untrained test model — random weights, output is not biology.** "
            f"Everything on these pages comes from {with_article(f'{engine.config.num_layers}-layer')} "
            f"{engine.family.title} model with random parameters, for trying the interface offline. "
            f"{_choose_trained(engine.family)}",
            icon=":material/warning:",
        )
    if engine is not None and not problem and engine.backend.precision != Precision.FP32:
        # An opt-in fast mode ($FLAMINO_PRECISION) is never the reference: every page says so.
        st.warning(f"**Opt-in {engine.backend.precision} mode: not reference numbers.** This server runs the model "
                   f"with {plain(engine.backend.precision_words)}; scores differ from fp32 ESM-2 (and "
                   "are stored apart from fp32 results). docs/benchmarks.md measures by how much.",
                   icon=":material/speed:")


def checkpoint_details(config, model: ModelId) -> str | None:
    """What a checkpoint of this machine (a folder or file, not a preset or a test model) was read
    as: its family, paper, size and the family's licence, as the picker says of a preset; the
    sidebar showed only its path, so an ESM-1b folder read as ESM-1b could not be told."""
    if model.kind != "path":
        return None
    family = FAMILIES[config.family]
    twin = next((name for name, p in PRESETS.items()
                 if (p.family, p.layers, p.dim) == (config.family, config.num_layers, config.embed_dim)), None)
    size = f"{PRESETS[twin].size} parameters ({twin}'s shape)" if twin else "a shape of its own"
    return (f"Read as {family.title} ({family.paper}): {size}, {config.num_layers} layers, {config.embed_dim} dims, "
            f"{config.attention_heads} heads · the family's published weights licence: {family.licence}")


def _choose_trained(family) -> str:
    """What the untrained model's banner asks for: a trained model of its family when this server
    offers one (it said "Choose an ESM-2 model" whatever the family), else any trained one."""
    offered = offered_models()
    local = offered is None  # every preset and a local checkpoint are offered
    trained = [] if local else [m for m in offered if not m.is_random]
    if not trained and not local:
        return "This server offers no trained model right now, so the pages show the interface only."
    families = {PRESETS[m.preset].family for m in trained if m.preset in PRESETS}
    wanted = f"{family.title} model" if local or family.id in families else "trained model"
    return f"Choose {with_article(wanted)} in the sidebar for real predictions."


def offered_models() -> list[ModelId] | None:
    """The server's models that can load now (hosted mode), as values; None locally, where the
    picker offers every preset, a local checkpoint and the test model."""
    allowed = current_limits().allowed_models
    if allowed is None:
        return None
    listed = [p for p in PRESETS if p in allowed] + sorted(m for m in allowed if m not in PRESETS)
    offered = offered_now([ModelId.parse(m) for m in listed])  # an offline server offers only what it has
    # One untrained model is enough to try the interface: two read as a choice that is none.
    untrained = [m for m in offered if m.is_random]
    return [m for m in offered if m not in untrained or m == untrained[0]]


def model_choices() -> list[str]:
    """What the model picker offers, as the widget's texts: everything locally, the server's models
    in hosted mode."""
    offered = offered_models()
    return [*PRESETS, LOCAL_CHOICE, RANDOM_TEST_MODEL] if offered is None else [m.text for m in offered]


def _use_test_model() -> None:
    st.session_state[MODEL] = RANDOM_TEST_MODEL
    forget_failure(RANDOM_TEST_MODEL)


def other_engine(identifier: str) -> tuple[Engine | None, str | None]:
    """An engine for a model beside the sidebar's (the pages' "Compare models": the door where
    their choice, text, is read once into a ``ModelId``), or the reason it cannot load: the same
    policy, progress and cache as the sidebar's model."""
    from flamino_core.weights import ModelError

    model = ModelId.parse(identifier)
    refused = current_limits().check_model(model)
    if refused:
        return None, refused[:1].upper() + refused[1:]
    try:
        _prepare(model)
        return load_engine(model), None
    except (ModelError, ValueError) as err:
        return None, UNAVAILABLE if hosted_mode() else f"{identifier}: {err}"
