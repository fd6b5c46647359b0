"""Masked predictions: what the model expects at each position, and single-substitution scores.

Everything covers the page's residue range (``_ui/rerun/ranges.py``) and is numbered in the sequence's
own numbering (``ctx.first``); the masked scan runs only the range's positions. A click
on a cell of the substitution map masks that position in the panel above and names the variant.
"""

from functools import partial

import numpy as np
import pandas as pd
import streamlit as st

from app_pages._ui.results import one_record as results, scans
from app_pages._ui.rerun.context import PageContext, current
from app_pages._ui.frame.downloads import csv_button, show_figure
from app_pages._ui.frame.widgets import kept_number_input, kept_radio, widget_key
from flamino_core.inputs import Numbering
from flamino_core.options import STRATEGIES
from flamino_core.analysis import amino_acid_probabilities, entropy, token_distribution, top_k_rows
from flamino_core import figures
from flamino_core.variants import from_log_probs, score_rows, substitution_names
from flamino_core.alphabet import AA_TO_IDX, STANDARD_AA_TOKEN_IDS, STANDARD_AMINO_ACIDS
from flamino_core.variants.figures import clicked_cell, substitution_map

RANGE_SEEN = "_pos_range"  # the range the masked position was last drawn with
PICKED = "_picked_cell"  # (sequence, 0-based index in it, mutant letter) last clicked on the map


def use_wt_marginals() -> None:
    st.session_state["scan"] = st.session_state[widget_key("scan")] = "wt-marginals"


CHEAPER = ("Use wt-marginals instead (one unmasked pass)", use_wt_marginals)


def probabilities_frame(probabilities: np.ndarray, sequence: str, entropies: np.ndarray,
                        numbering: Numbering) -> pd.DataFrame:
    frame = pd.DataFrame(probabilities.T, columns=list(STANDARD_AMINO_ACIDS))
    frame.insert(0, "entropy_bits", entropies)
    frame.insert(0, "residue", list(sequence))
    frame.insert(0, "position", np.asarray(numbering.numbers(len(sequence))))
    return frame


def scores_frame(record_id: str, part: str, substitution: np.ndarray, numbering: Numbering) -> pd.DataFrame:
    """The map as CSV rows, with each substitution also named as a variant (``V1A``, numbered
    in ``numbering``, the record's, as the Variants page and ``flamino variants`` write it)."""
    frame = pd.DataFrame(
        list(score_rows(record_id, part, substitution, numbering)),
        columns=["record", "position", "wt", "mt", "score"],
    )
    frame["mutant"] = substitution_names(part, numbering)
    return frame


def pick_cell(sequence: str, part: str, start: int, numbering: Numbering) -> None:
    """A click on the map of ``part`` (``sequence[start:]``, numbered in ``numbering``): mask that
    position in the panel above and remember the variant."""
    event = st.session_state.get("subst")
    cell = clicked_cell(event["selection"]["points"], part, numbering) if event else None
    if cell is None:
        return
    index, mutant = start + cell[0], cell[1]
    st.session_state["pos"] = st.session_state[widget_key("pos")] = index + 1  # kept as an index
    st.session_state[PICKED] = (sequence, index, mutant)


def picked(sequence: str) -> tuple[int, str] | None:
    """The cell last clicked on this sequence's map: (0-based index, mutant letter)."""
    cell = st.session_state.get(PICKED)
    return cell[1:] if cell and cell[0] == sequence else None


def follow_range(shown) -> None:
    """Move the masked position to the range's first residue when the range changes and the
    position is outside it (issue 24: it stayed at 1 for a range 20-60). A position typed outside
    the range, or carried by a link, stays: any position can be masked."""
    ss, span = st.session_state, (shown.start, shown.stop)
    before, ss[RANGE_SEEN] = ss.get(RANGE_SEEN), span
    position = ss.get("pos")
    inside = isinstance(position, int) and shown.start < position <= shown.stop
    if (position is None or before not in (None, span)) and not inside:
        ss["pos"] = ss[widget_key("pos")] = shown.start + 1


def probability_overview(ctx: PageContext, probabilities: np.ndarray,
                         entropies: np.ndarray) -> None:
    """The unmasked predictions of the residues shown, as a heatmap with its entropy track."""
    shown = ctx.shown
    part, part_stem = ctx.sequence[shown.span], ctx.stem + shown.stem()
    st.markdown(
        "What the model predicts at each position when it sees the whole sequence (no masking). "
        "Outlined squares are the sequence's own residues; the track below is the entropy of each "
        "prediction (high: the model is unsure what belongs there)."
    )
    overview = figures.probability_heatmap(probabilities, part, entropies, numbering=shown.numbering)
    with show_figure(overview, "prob_heatmap", f"{part_stem}_probabilities"):
        csv_button(
            "Probabilities and entropy (CSV)",
            lambda: probabilities_frame(probabilities, part, entropies, shown.numbering),
            f"{part_stem}_probabilities.csv",
            "prob_csv",
            model=ctx.model_name,
        )


def top_predictions(ctx: PageContext, probabilities: np.ndarray) -> None:
    """The k most probable residues at each position shown, as a table."""
    part, part_stem = ctx.sequence[ctx.shown.span], ctx.stem + ctx.shown.stem()
    st.subheader("Top predictions per position")
    k = kept_number_input("How many (k)", "k")
    top = pd.DataFrame(top_k_rows(probabilities, part, k, numbering=ctx.shown.numbering))
    st.dataframe(top, hide_index=True, height=360, width="stretch")
    csv_button("Top-k table (CSV)", lambda: top, f"{part_stem}_top{k}.csv", "topk_csv",
               model=ctx.model_name)


def masked_position(ctx: PageContext, logits: np.ndarray) -> None:
    """One position masked: the model's distribution there beside the unmasked one, and the
    residue's (and a clicked variant's) score."""
    seq, stem, shown = ctx.sequence, ctx.stem, ctx.shown
    st.subheader("Mask one position")
    number_one = ctx.first
    follow_range(shown)
    position = kept_number_input(
        f"Position ({number_one:,}–{number_one + len(seq) - 1:,})", "pos", max_value=len(seq),
        default=shown.start + 1, shift=number_one - 1,
    )
    number = position + number_one - 1
    log_probs = results.masked_position(ctx.engine, seq, position - 1)  # (33,)
    masked = np.exp(log_probs.astype(np.float64))
    masked_aa = masked[STANDARD_AA_TOKEN_IDS]
    residue = seq[position - 1]
    unmasked = amino_acid_probabilities(logits[position - 1:position])[:, 0]
    fig = figures.distribution_bars(masked_aa, unmasked, number, residue,
                                    other_mass=1 - masked_aa.sum())
    with show_figure(fig, "masked_bars", f"{stem}_pos{number}_masked"):
        distribution = token_distribution(log_probs)
        csv_button(
            "All 33 tokens (CSV)",
            lambda: pd.DataFrame(
                {"token": list(distribution), "probability": list(distribution.values())}
            ),
            f"{stem}_pos{number}_masked.csv",
            "masked_csv",
            model=ctx.model_name,
        )
    if residue in STANDARD_AMINO_ACIDS:
        masked_score_captions(seq, position - 1, number, log_probs, masked_aa)


def masked_score_captions(seq: str, index: int, number: int, log_probs: np.ndarray,
                          masked_aa: np.ndarray) -> None:
    """The masked residue's probability and rank, and the clicked variant's score at it."""
    residue = seq[index]
    p_residue = masked_aa[STANDARD_AMINO_ACIDS.index(residue)]
    rank = int((masked_aa > p_residue).sum()) + 1
    st.caption(f"p({residue} | position {number} masked) = {p_residue:.3f}; rank {rank} of 20.")
    cell = picked(seq)
    if cell and cell[0] == index and cell[1] != residue:
        masked_score = float(log_probs[AA_TO_IDX[cell[1]]]) - float(log_probs[AA_TO_IDX[residue]])
        st.caption(f"{residue}{number}{cell[1]} (clicked on the map): "
                   f"masked-marginal score {masked_score:.3f}.")


def substitution_scores(ctx: PageContext) -> tuple[np.ndarray, str]:
    """The scoring choice and the range's substitution scores by it: the masked scan's, with its
    pseudo-perplexity, once done; wt-marginals meanwhile or when chosen."""
    engine, seq, shown = ctx.engine, ctx.sequence, ctx.shown
    scan = kept_radio("Scoring", "scan")
    log_probs_range = None
    if STRATEGIES[scan].masked:  # one pass per position of the range, a background job in queued chunks
        log_probs_range = scans.masked_scan(engine, seq, range(shown.start, shown.stop), shown.label(),
                                            "the masked scan", cheaper=CHEAPER)
    if log_probs_range is not None:
        # What substitution_maps.substitution_map returns.
        scored = from_log_probs(log_probs_range, seq[shown.span])
        st.metric(
            "Pseudo-perplexity" + ("" if shown.whole else f" of {shown.label()}"),
            f"{scored.pppl:.2f}",
            help="exp(−mean log p(residue | its position masked)). 1 = every residue predicted with "
            "certainty; 20 ≈ uniform guessing over the amino acids. Lower means the model finds the "
            "sequence more natural.",
        )
        return scored.substitutions, "masked-marginals"
    substitution = results.wt_marginal_scores(engine, seq)[shown.span]
    if STRATEGIES[scan].masked:
        st.caption("Showing the fast wt-marginals scores meanwhile.")
    else:
        st.caption("Pseudo-perplexity needs the masked scan: choose masked-marginals above.")
    return substitution, "wt-marginals"


def substitution_section(ctx: PageContext) -> None:
    """The clickable single-substitution map of the range, its CSV and the clicked variant."""
    seq, shown = ctx.sequence, ctx.shown
    part, numbering, part_stem = seq[shown.span], shown.numbering, ctx.stem + shown.stem()
    st.subheader("Single-substitution map")
    substitution, method = substitution_scores(ctx)
    st.caption("Dots mark the wild-type residues. Click a cell to mask its position above and see that "
               "variant's score.")
    fig = substitution_map(substitution, part, method, numbering=numbering, clickable=True)
    on_select = partial(pick_cell, seq, part, shown.start, numbering)
    with show_figure(fig, "subst", f"{part_stem}_{method}", on_select=on_select):
        csv_button(
            f"Scores, {method} (CSV)",
            lambda: scores_frame(ctx.record.id, part, substitution, numbering),
            f"{part_stem}_{method}.csv",
            "subst_csv",
            model=ctx.model_name,
        )
    cell = picked(seq)
    if cell and shown.start <= cell[0] < shown.start + len(part):
        index, mutant = cell
        value = substitution[index - shown.start, STANDARD_AMINO_ACIDS.index(mutant)]
        variant = f"{seq[index]}{numbering.number(index - shown.start)}{mutant}"
        st.info(f"{variant}: {method} score {value:.3f} (its position is masked in the panel "
                "above).", icon=":material/ads_click:")


def main(ctx: PageContext) -> None:
    logits = results.logits(ctx.engine, ctx.sequence)
    probabilities = amino_acid_probabilities(logits[ctx.shown.span])  # (20, shown)
    probability_overview(ctx, probabilities, entropy(probabilities))
    left, right = st.columns(2)
    with left:
        top_predictions(ctx, probabilities)
    with right:
        masked_position(ctx, logits)
    substitution_section(ctx)


if __name__ == "__main__":  # run by app.py (context.serve), with this rerun's context
    main(current())
