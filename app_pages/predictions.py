"""Masked predictions: what the model expects at each position, and single-substitution scores."""

import numpy as np
import pandas as pd
import streamlit as st

from app_pages import _state as state
from flamino_core import analysis, figures, scores
from flamino_core.alphabet import STANDARD_AA_TOKEN_IDS, STANDARD_AMINO_ACIDS

SCANS = {
    "wt": "wt-marginals — fast: one unmasked pass",
    "masked": "masked-marginals — exact: one pass per position (slower), gives pseudo-perplexity",
}


def probabilities_frame(probabilities: np.ndarray, sequence: str, entropies: np.ndarray) -> pd.DataFrame:
    frame = pd.DataFrame(probabilities.T, columns=list(STANDARD_AMINO_ACIDS))
    frame.insert(0, "entropy_bits", entropies)
    frame.insert(0, "residue", list(sequence))
    frame.insert(0, "position", np.arange(1, len(sequence) + 1))
    return frame


def main() -> None:
    inputs = state.page_inputs()
    if inputs is None:
        return
    record, engine, model, seq, stem = inputs
    st.header("Masked predictions")
    state.record_caption(record)

    logits = state.logits(model, seq)
    probabilities = analysis.amino_acid_probabilities(logits)  # (20, L)
    entropies = analysis.entropy(probabilities)
    st.markdown(
        "What the model predicts at each position when it sees the whole sequence (no masking). "
        "Outlined squares are the sequence's own residues; the track below is the entropy of each "
        "prediction (high: the model is unsure what belongs there)."
    )
    overview = figures.probability_heatmap(probabilities, seq, entropies)
    with state.show_figure(overview, "prob_heatmap", f"{stem}_probabilities"):
        state.csv_button(
            "Probabilities and entropy (CSV)",
            lambda: probabilities_frame(probabilities, seq, entropies),
            f"{stem}_probabilities.csv",
            "prob_csv",
        )

    left, right = st.columns(2)
    with left:
        st.subheader("Top predictions per position")
        k = st.number_input(
            "How many (k)", min_value=1, max_value=20, step=1, **state.seeded("k", 3, lambda v: 1 <= v <= 20)
        )
        state.remember("k", int(k))
        top = pd.DataFrame(analysis.top_k_rows(probabilities, seq, int(k)))
        st.dataframe(top, hide_index=True, height=360, width="stretch")
        state.csv_button("Top-k table (CSV)", lambda: top, f"{stem}_top{k}.csv", "topk_csv")
    with right:
        st.subheader("Mask one position")
        position = st.number_input(
            f"Position (1–{len(seq)})",
            min_value=1,
            max_value=len(seq),
            step=1,
            **state.seeded("pos", 1, lambda v: isinstance(v, int) and 1 <= v <= len(seq)),
        )
        position = int(position)
        state.remember("pos", position)
        log_probs = state.masked_position(model, seq, position - 1)  # (33,)
        masked = np.exp(log_probs.astype(np.float64))
        masked_aa = masked[STANDARD_AA_TOKEN_IDS]
        residue = seq[position - 1]
        fig = figures.distribution_bars(
            masked_aa, probabilities[:, position - 1], position, residue, other_mass=1 - masked_aa.sum()
        )
        with state.show_figure(fig, "masked_bars", f"{stem}_pos{position}_masked"):
            distribution = analysis.token_distribution(log_probs)
            state.csv_button(
                "All 33 tokens (CSV)",
                lambda: pd.DataFrame(
                    {"token": list(distribution), "probability": list(distribution.values())}
                ),
                f"{stem}_pos{position}_masked.csv",
                "masked_csv",
            )
        if residue in STANDARD_AMINO_ACIDS:
            p_residue = masked_aa[STANDARD_AMINO_ACIDS.index(residue)]
            rank = int((masked_aa > p_residue).sum()) + 1
            st.caption(f"p({residue} | position {position} masked) = {p_residue:.3f}; rank {rank} of 20.")

    st.subheader("Single-substitution map")
    scan = st.radio(
        "Scoring", list(SCANS), format_func=SCANS.get, **state.seeded("scan", "wt", lambda v: v in SCANS, options=SCANS)
    )
    state.remember("scan", scan)
    log_probs_all = None
    if scan == "masked":  # L forward passes: through the server's heavy-job queue
        log_probs_all = state.heavy(state.masked_scan, model, seq, what="the masked-marginal scan")  # (L, 33)
    if log_probs_all is not None:
        substitution = scores.substitution_scores(log_probs_all, seq)
        pppl = scores.pseudo_perplexity(log_probs_all, seq)
        st.metric(
            "Pseudo-perplexity",
            f"{pppl:.2f}",
            help="exp(−mean log p(residue | its position masked)). 1 = every residue predicted with "
            "certainty; 20 ≈ uniform guessing over the amino acids. Lower means the model finds the "
            "sequence more natural.",
        )
        method = "masked-marginals"
    else:
        substitution = state.wt_marginal_scores(model, seq)
        if scan == "masked":
            st.caption("Showing the fast wt-marginals scores meanwhile.")
        else:
            st.caption("Pseudo-perplexity needs the masked scan: choose masked-marginals above.")
        method = "wt-marginals"
    with state.show_figure(
        figures.substitution_heatmap(substitution, seq, method), "subst", f"{stem}_{method}"
    ):
        state.csv_button(
            f"Scores, {method} (CSV)",
            lambda: pd.DataFrame(
                list(scores.score_rows(record.id, seq, substitution)),
                columns=["record", "position", "wt", "mt", "score"],
            ),
            f"{stem}_{method}.csv",
            "subst_csv",
        )


main()
