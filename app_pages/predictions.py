"""Masked predictions: what the model expects at each position, and single-substitution scores.

Everything covers the page's residue range (``_ui/ranges.py``) and is numbered in the sequence's
own numbering (``inputs.first_number``); the masked scan runs only the range's positions.
"""

import numpy as np
import pandas as pd
import streamlit as st

from app_pages._ui import inputs, models, ranges, results, scans
from app_pages._ui.downloads import csv_button, show_figure
from app_pages._ui.widgets import kept_number_input, kept_radio
from flamino_core import analysis, figures, scores
from flamino_core.alphabet import STANDARD_AA_TOKEN_IDS, STANDARD_AMINO_ACIDS


def probabilities_frame(probabilities: np.ndarray, sequence: str, entropies: np.ndarray, first: int) -> pd.DataFrame:
    frame = pd.DataFrame(probabilities.T, columns=list(STANDARD_AMINO_ACIDS))
    frame.insert(0, "entropy_bits", entropies)
    frame.insert(0, "residue", list(sequence))
    frame.insert(0, "position", np.arange(first, first + len(sequence)))
    return frame


def main() -> None:
    page = models.page_inputs()
    if page is None:
        return
    record, engine, model, seq, stem = page
    st.header("Masked predictions")
    inputs.record_caption(record)
    shown = ranges.page_range(record)
    part, first, part_stem = seq[shown.span], shown.number, stem + shown.stem()

    logits = results.logits(model, seq)
    probabilities = analysis.amino_acid_probabilities(logits[shown.span])  # (20, shown)
    entropies = analysis.entropy(probabilities)
    st.markdown(
        "What the model predicts at each position when it sees the whole sequence (no masking). "
        "Outlined squares are the sequence's own residues; the track below is the entropy of each "
        "prediction (high: the model is unsure what belongs there)."
    )
    overview = figures.probability_heatmap(probabilities, part, entropies, first=first)
    with show_figure(overview, "prob_heatmap", f"{part_stem}_probabilities"):
        csv_button(
            "Probabilities and entropy (CSV)",
            lambda: probabilities_frame(probabilities, part, entropies, first),
            f"{part_stem}_probabilities.csv",
            "prob_csv",
        )

    left, right = st.columns(2)
    with left:
        st.subheader("Top predictions per position")
        k = kept_number_input("How many (k)", "k")
        top = pd.DataFrame(analysis.top_k_rows(probabilities, part, k, first=first))
        st.dataframe(top, hide_index=True, height=360, width="stretch")
        csv_button("Top-k table (CSV)", lambda: top, f"{part_stem}_top{k}.csv", "topk_csv")
    with right:
        st.subheader("Mask one position")
        number_one = inputs.first_number(record)
        position = kept_number_input(
            f"Position ({number_one:,}–{number_one + len(seq) - 1:,})", "pos", max_value=len(seq),
            shift=number_one - 1,
        )  # fmt: skip
        number = position + number_one - 1
        log_probs = results.masked_position(model, seq, position - 1)  # (33,)
        masked = np.exp(log_probs.astype(np.float64))
        masked_aa = masked[STANDARD_AA_TOKEN_IDS]
        residue = seq[position - 1]
        unmasked = analysis.amino_acid_probabilities(logits[position - 1:position])[:, 0]
        fig = figures.distribution_bars(masked_aa, unmasked, number, residue, other_mass=1 - masked_aa.sum())
        with show_figure(fig, "masked_bars", f"{stem}_pos{number}_masked"):
            distribution = analysis.token_distribution(log_probs)
            csv_button(
                "All 33 tokens (CSV)",
                lambda: pd.DataFrame(
                    {"token": list(distribution), "probability": list(distribution.values())}
                ),
                f"{stem}_pos{number}_masked.csv",
                "masked_csv",
            )
        if residue in STANDARD_AMINO_ACIDS:
            p_residue = masked_aa[STANDARD_AMINO_ACIDS.index(residue)]
            rank = int((masked_aa > p_residue).sum()) + 1
            st.caption(f"p({residue} | position {number} masked) = {p_residue:.3f}; rank {rank} of 20.")

    st.subheader("Single-substitution map")
    scan = kept_radio("Scoring", "scan")
    log_probs_range = None
    if scan == "masked":  # one pass per position of the range, in queued chunks, kept as they finish
        log_probs_range = scans.masked_scan(model, seq, shown)  # (shown, 33) or None
    if log_probs_range is not None:
        scored = scores.from_masked_log_probs(log_probs_range, part)  # what scores.score returns
        substitution, pppl = scored.substitutions, scored.pppl
        st.metric(
            "Pseudo-perplexity" + ("" if shown.whole else f" of {shown.label()}"),
            f"{pppl:.2f}",
            help="exp(−mean log p(residue | its position masked)). 1 = every residue predicted with "
            "certainty; 20 ≈ uniform guessing over the amino acids. Lower means the model finds the "
            "sequence more natural.",
        )
        method = "masked-marginals"
    else:
        substitution = results.wt_marginal_scores(model, seq)[shown.span]
        if scan == "masked":
            st.caption("Showing the fast wt-marginals scores meanwhile.")
        else:
            st.caption("Pseudo-perplexity needs the masked scan: choose masked-marginals above.")
        method = "wt-marginals"
    with show_figure(
        figures.substitution_heatmap(substitution, part, method, first=first), "subst", f"{part_stem}_{method}"
    ):
        csv_button(
            f"Scores, {method} (CSV)",
            lambda: pd.DataFrame(
                list(scores.score_rows(record.id, part, substitution, first=first)),
                columns=["record", "position", "wt", "mt", "score"],
            ),
            f"{part_stem}_{method}.csv",
            "subst_csv",
        )


main()
