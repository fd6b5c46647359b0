"""The Variant effects page's "structure-aware (SaProt)" choice: with a structure-aware model in
the sidebar and a structure held for the session (the Structure page, or a structure uploaded on
the Input page), the mutation list is scored on the record's 3Di letters from that structure
(``flamino_core.structure.three_di``: the record's own chain when it was made of one, else the
chain most like it; pLDDT < 70 masked where the file is a prediction), and the page says which
structure and chain it used and how many residues were structure-aware. Without a structure the
page says what the model reads instead (every residue ``#``).
"""

from __future__ import annotations

import streamlit as st

from flamino_core.options import STRATEGIES, scoring_strategies
from flamino_core.structure import StructureError, StructureTokens, is_predicted_structure, structure_tokens

from app_pages._ui.frame.widgets import kept_toggle, plain
from app_pages._ui.structure import loaded_structure

TOGGLE = "vstructure"
_TOKENS = "_structure_tokens"  # (structure key, sequence, chain) -> StructureTokens, the last one


def structure_choice(engine, sequence: str, record_id: str | None = None,
                     chain: str | None = None) -> StructureTokens | None:
    """The 3Di letters to score ``sequence`` (the record ``record_id``'s, if it is one; from
    ``chain``, else the record's own chain, else the chain most like it) with, or None (a
    sequence model, no structure held, the choice switched off, or a structure with no
    chain like the sequence: said on the page)."""
    if engine is None or not engine.family.structure_aware:
        return None
    found = loaded_structure.held()
    if found is None:
        st.caption(f"{engine.family.title} without a structure reads every residue as '#' (the sequence alone, "
                   "which forgoes what the model gains from structure). Load a structure on the Structure page, "
                   "or upload one on the Input page, to score structure-aware.")
        return None
    parsed, key, _ = found
    if not kept_toggle("structure-aware (SaProt)", TOGGLE, default=True,
                       help=f"Pair each residue with its Foldseek 3Di letter from {parsed.name}"):
        return None
    chain = chain or (loaded_structure.record_chain(record_id) if record_id else None)
    wanted = (key, sequence, chain)
    held = st.session_state.get(_TOKENS)
    if held is None or held[0] != wanted:
        try:
            with st.spinner("Reading the structure's 3Di letters…"):
                tokens = structure_tokens(sequence, parsed, chain, predicted=is_predicted_structure(parsed))
        except StructureError as err:
            st.warning(plain(f"Not structure-aware: {err}"))
            return None
        st.session_state[_TOKENS] = held = (wanted, tokens)
    return held[1]


def for_strategy(tokens: StructureTokens | None, strategy: str) -> StructureTokens | None:
    """``tokens`` where ``strategy`` reads them (the masked ones); otherwise None, said."""
    read_by = [name for name in scoring_strategies() if STRATEGIES[name].reads_structure]
    if tokens is not None and strategy not in read_by:
        st.info(f"{strategy} reads the sequence only: choose {' or '.join(read_by)} to score structure-aware.")
        return None
    return tokens


def describe(tokens: StructureTokens | None, numbering=None) -> None:
    """The result's line: which structure and chain, how many residues were structure-aware, and
    which positions were masked for pLDDT < 70 (in the record's ``numbering``); a warning when
    every residue was masked, as the scores are then the sequence's alone (#66 D6)."""
    if tokens is None:
        return
    st.caption(plain(f"Structure-aware: {tokens.describe()}."))
    if tokens.all_masked:
        st.warning(plain(f"Every residue of {tokens.structure} is masked (pLDDT < 70), so these scores are "
                         "sequence-only: SaProt read '#' at every position, as without a structure. A fold this "
                         "unsure adds nothing; use an experimental structure or a confident prediction."),
                   icon=":material/warning:")
    elif tokens.masked:
        where = tokens.masked_ranges(numbering) if numbering is not None else tokens.masked_ranges()
        st.caption(plain(f"Masked for pLDDT < 70 (read as '#', sequence only): positions {where}."))
