"""The sidebar's model picker: what this server offers (hosted: only what can load now), grouped
by family (``families.PRESETS`` is in family order; each label starts with its family's title),
short labels that fit the sidebar with the details underneath (family, size, context length,
licence), and a local checkpoint path.

The loading itself, its failures, the banner and the list offered (``model_choices``) are in
``model_loading.py``; which models may be offered is decided in ``policy.py``.
"""

from __future__ import annotations

import streamlit as st

from flamino_core.model import FAMILIES, ModelId, PRESETS

from app_pages._ui.input.model_loading import LOCAL_CHOICE, MODEL, forget_failure, model_choices
from app_pages._ui.server.policy import RANDOM_TEST_MODEL, current_limits, hosted_mode, public_model_name
from app_pages._ui.frame.widgets import kept_selectbox, kept_text_input, widget_key

RANDOM_LABEL = "untrained test model"  # the picker's label; the banner says the rest
# Session-state keys.
MODEL_CHOICE = "model_choice"
LOCAL_PATH = "local_path"


# --- the picker -------------------------------------------------------------------------------
def model_label(identifier: str) -> str:
    """The picker's short label (the sidebar cuts long ones off); ``model_details`` says more."""
    if identifier in PRESETS:
        preset = PRESETS[identifier]
        label = f"{preset.title} {preset.size}"
        twins = [name for name, p in PRESETS.items() if (p.title, p.size) == (preset.title, preset.size)]
        # ESM-1v's five 650M members: numbered as published (_1 .. _5); ESM C's 2024-12 and 2026
        # weights by their release (``Preset.variant``); the details name each.
        return f"{label} · {preset.variant or identifier.rsplit('_', 1)[-1]}" if len(twins) > 1 else label
    if identifier == LOCAL_CHOICE:
        return "Local checkpoint…"
    model_id = ModelId.parse(identifier)
    if model_id.is_random:
        spec = model_id.random_spec
        return RANDOM_LABEL if spec == "tiny" else f"{RANDOM_LABEL} ({spec})"
    if current_limits().allowed_models is not None:  # the operator's checkpoint: not its path
        return f"this server's model ({public_model_name(identifier, current_limits())})"
    return identifier


def model_details(identifier: str) -> str | None:
    """One line under the picker about the chosen model: its family, size, context length and
    licence, and whether it is here."""
    if identifier in PRESETS:
        from flamino_core.weights import cached_presets

        preset = PRESETS[identifier]
        family = FAMILIES[preset.family]
        if hosted_mode():
            where = "on this server"
        else:
            where = "cached" if identifier in cached_presets() else "download needed (once, from the Hugging Face Hub)"
        contacts = "" if family.contact_head else "; attention maps, no contact head"
        return (f"{identifier}: {family.title} ({family.paper}), {preset.size} parameters, {preset.layers} layers, "
                f"{preset.context:,} residues per pass (longer: windows){contacts} · weights licence: "
                f"{preset.licence} · {where}")
    if ModelId.parse(identifier).is_random:
        return "Random weights, for trying the interface: its output is not biology."
    if identifier == LOCAL_CHOICE:
        return ("A folder (Hugging Face or flamino checkpoint), a fair-esm .pt or an EvolutionaryScale ESM C .pth "
                "file on this machine.")
    return None


def model_picker() -> None:
    """Sidebar controls choosing ``st.session_state[MODEL]``."""
    from flamino_core.weights import default_model

    ss = st.session_state
    choices = model_choices()
    active, active_id = ss[MODEL], ModelId.parse(ss[MODEL])
    if LOCAL_CHOICE not in choices and (active_id.preset or active) not in choices:
        # Hosted: only the server's models that can load now, whatever came before.
        ss[MODEL] = default_model() if default_model() in choices else (choices or [RANDOM_TEST_MODEL])[0]
        active, active_id = ss[MODEL], ModelId.parse(ss[MODEL])
    if active_id.is_random and active not in choices and LOCAL_CHOICE in choices:
        choices.append(active)
    is_path = active not in choices and active_id.preset is None
    if active_id.preset is not None:
        default_choice = active_id.preset
    else:
        default_choice = LOCAL_CHOICE if is_path else active
    if is_path:
        ss.setdefault(LOCAL_PATH, active)
    kept = ss.get(widget_key(MODEL_CHOICE))
    if kept is not None and kept not in (default_choice, LOCAL_CHOICE):
        # The model changed elsewhere ("Try the interface with the untrained test model", a link):
        # the picker shows the model in use, not the one chosen before (it showed ESM-2 35M and its
        # details while the banner said the untrained model ran). A path being typed is left alone.
        ss[widget_key(MODEL_CHOICE)] = ss[MODEL_CHOICE] = default_choice

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
        help=f"Published checkpoints by family ({', '.join(f.title for f in FAMILIES.values())}) from the "
        "Hugging Face Hub, converted once and cached; docs/models.md says what each offers. Bigger models "
        "are slower and need more memory.",
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
