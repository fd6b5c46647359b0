"""Variant effects: your mutation list or deep mutational scan, scored as ProteinGym scores ESM-2."""

from pathlib import Path

import streamlit as st

from app_pages._ui.input import reading as inputs

from app_pages._ui.results import one_record as results, scans

from app_pages._ui.variants import compare, suggestions, scoring as variant_results
from app_pages._ui.structure import structure_aware, variant_structure
from app_pages._ui.rerun.context import PageContext, current, ready
from app_pages._ui.frame.downloads import csv_button, json_button, safe_name, show_figure
from app_pages._ui.server.policy import visitor_model_name
from app_pages._ui.variants.views import (
    download_frame,
    dms_upload,
    explain_scores,
    list_missing,
    mutation_list,
    scores_table,
    skipped,
    strategy_picker,
)
from app_pages._ui.frame.widgets import counted, kept_radio, kept_toggle, plain, widget_key
from flamino_core.inputs import Numbering
from flamino_core.variants import (COLUMN as STRUCTURE_COLUMN, RANDOM_WEIGHTS_NOTE, dms_heatmaps, dms_metrics,
                                   dms_scatter, from_log_probs, from_record, numbering_problem, output_frame,
                                   relabel_positions, variant_map, with_structure_column)
from flamino_core.options import STRATEGIES, names

STATISTICS = [("spearman", "Spearman ρ"), ("auc", "AUC"), ("mcc", "MCC"), ("ndcg", "NDCG"),
              ("top10_recall", "Top-10% recall")]


def notes(found: list[str]) -> None:
    for note in found:
        if note != RANDOM_WEIGHTS_NOTE:  # the banner at the top says so already
            st.caption(plain(note))


def use_wt_map() -> None:
    st.session_state["vmap"] = st.session_state[widget_key("vmap")] = "wt-marginals"


def substitution_scores(engine, seq: str, structure: str | None = None):
    """The record's full substitution map, as the page's map choice asks, and its method. The
    masked map is a scan of the whole sequence (``scans.py``): its cost said first when it is
    long, a chunk per queue slot, every position through the result store (the variants' own
    masked positions run no second pass). ``structure``: the 3Di letters the list was scored on."""
    if STRATEGIES[kept_radio("Map behind your variants", "vmap", horizontal=True)].masked:
        log_probs = scans.masked_scan(engine, seq, range(len(seq)), "the whole sequence", "the masked-marginal map",
                                      cheaper=("Show the wt-marginals map", use_wt_map),
                                      structure=structure)  # (L, 33) or None
        if log_probs is not None:
            return from_log_probs(log_probs, seq).substitutions, "masked-marginals"
        st.caption("Showing the fast wt-marginals map meanwhile.")
    return results.wt_marginal_scores(engine, seq), "wt-marginals"


def partial_rows(partial, columns: list[str]) -> None:
    """The rows scored so far, while the rest are computed."""
    if partial is None:
        return
    shown = [c for c in columns if c in partial.columns]
    st.caption(f"{len(partial):,} rows scored so far; the rest fill in as they are computed.")
    st.dataframe(partial[shown], hide_index=True, width="stretch", height=min(420, 38 + 35 * max(len(partial), 1)))


def structure_numbering_of(record, numbering: Numbering):
    """The structure's own numbering of a record made of a structure's chain, when it is not the
    sequence's (gaps, insertion codes, another start than ``numbering``'s); else None."""
    author = from_record(record)
    plain_numbers = tuple(str(n) for n in numbering.numbers(len(record.sequence)))
    return None if author is None or author.labels == plain_numbers else author


def list_section(ctx: PageContext) -> None:
    if not ready(ctx):
        return
    record, engine, seq = ctx.record, ctx.engine, ctx.sequence
    inputs.record_caption(record, ctx.record_read, ctx.numbering)
    author, read_in = list_numbering(ctx)
    text = mutation_list()
    if not text.strip():
        list_missing()
        return
    variants = parsed_list(text, seq, ctx.numbering, record.id, read_in)
    if not variants:
        return
    strategy = strategy_picker(seq, variants)
    if strategy is None:
        return
    tokens = structure_aware.for_strategy(structure_aware.structure_choice(engine, seq, record.id), strategy)
    letters = tokens.letters if tokens is not None else None
    scoring = variant_results.list_scores(engine, seq, text, ctx.numbering, strategy, record.id, letters, read_in)
    scored = scoring.done
    if scored is None:
        partial_rows(scoring.partial, ["mutant", "variant", "score", "status"])
        return
    notes(scored.notes)
    structure_aware.describe(tokens, ctx.numbering)
    table = list_scores_table(ctx, scored, strategy, author, shown_in=read_in)

    st.subheader("Your variants on the substitution map")
    if any(v.edits for v in variants):
        st.caption("Indels, stops and frameshifts change more than one cell: the map marks substitutions only "
                   "(the table above has every score).")
    substitution, method = substitution_scores(engine, seq, letters)
    fig = variant_map(substitution, seq, variants, numbering=ctx.numbering, method=method, table=table)
    if read_in is not None:  # the map's positions as the structure numbers them (S195, not S192)
        fig = relabel_positions(fig, seq, ctx.numbering, read_in)
    show_figure(fig, "variant_map", f"{ctx.stem}_variants_map")
    # A variant's own fold beside the wild type's (#66), the list's first substitution offered
    first = next((v.text for v in variants if not v.edits), "")
    variant_structure.section(ctx, suggested=first, author=read_in)


def list_numbering(ctx: PageContext):
    """The structure's own numbering of the record (None when it has none of its own), and the one
    the list is read in: the structure's when the user keeps it, else None (the sequence's)."""
    numbering, seq = ctx.numbering, ctx.sequence
    author = structure_numbering_of(ctx.record, numbering)
    if numbering.first != 1 and author is None:  # (a structure's record: the choice below says how)
        st.caption(f"Positions are numbered from {numbering.first} (from the record id).")
    in_structure = author is not None and kept_radio(
        "Positions are numbered", "vnumbering", ["structure", "sequence"], default="structure", horizontal=True,
        format_func={"structure": f"as the structure numbers them ({author.span()}, with its gaps and insertion "
                                  "codes: S195A, Y184AF)",
                     "sequence": f"along the sequence ({numbering.span(len(seq))})"}.get,
        help="The record was made of a structure's chain whose file numbers residues its own way (chymotrypsin "
             "numbering skips numbers and inserts 184A). Either way the table shows both numberings.") == "structure"
    return author, author if in_structure else None


def parsed_list(text: str, seq: str, numbering: Numbering, record_id: str, author) -> list:
    """The list's variants (``author``: read in the structure's numbering); what is wrong with the
    list, or with every entry, said on the page."""
    variants, issues = variant_results.parse_list(text, seq, numbering, record_id, author)
    for issue in issues:
        if issue.order < 0:  # about the whole list: unreadable, nothing found, a shifted numbering
            st.warning(plain(issue.message))
    if not variants:
        entries = [i for i in issues if i.order >= 0]  # a whole-list refusal (above) has no entries to list
        if entries:
            st.error(f"None of the {len(entries):,} entries can be scored; the reasons are listed below.")
            st.dataframe({"entry": [i.text for i in entries], "problem": [i.message for i in entries]},
                         hide_index=True, width="stretch")
    return variants


def list_scores_table(ctx: PageContext, scored, strategy: str, author, shown_in=None):
    """The list's counts, its scores table (in both numberings for a structure's record) and
    CSV; returns the table. ``shown_in``: the structure's numbering the list is read in, which
    the table's positions and its From/To filters then use too (S195A at 195 on 1GBT)."""
    numbering, seq = ctx.numbering, ctx.sequence
    counts = st.columns(3)
    counts[0].metric("Scored", f"{scored.n_scored:,}")
    counts[1].metric("Not scored", f"{scored.n_skipped:,}")
    counts[2].metric("Model passes", f"{scored.passes:,}", help="masked or unmasked forward passes run")
    table = scored.table
    columns = ["mutant", "variant", "positions", "score"]
    if author is not None:  # both numberings, on the page and in the CSV
        table = with_structure_column(table, author, ctx.numbering)
        columns.insert(2, STRUCTURE_COLUMN)
    columns += ["non_additivity"] if STRATEGIES[strategy].joint else []
    columns += ["kind", "normalisation"] if STRATEGIES[strategy].whole_sequences else []
    columns += ["label"] if (table["label"] != "").any() else []
    scores_table(table, numbering.first, numbering.last(len(seq)), columns, source=f"list {ctx.record.id}",
                 structure=None if shown_in is None else (shown_in, numbering))
    explain_scores(strategy, table["kind"][table["status"] == "ok"] if "kind" in table else ())
    skipped(table)
    csv_button("Scores (CSV)", lambda: download_frame(table, strategy),
               f"{ctx.stem}_variants_{strategy}.csv", "variants_csv", model=ctx.model_name)
    return table


def dms_section(ctx: PageContext) -> None:
    if ctx.engine is None:
        st.info("Choose a model that can be loaded in the sidebar to score a DMS table.")
        return
    stored = dms_upload()
    if stored is None:
        return
    name, data = stored
    wild = dms_wild_type(ctx, name)
    if wild is None:
        return
    wild_type, numbering, record_id = wild
    table = checked_dms_table(name, data, wild_type, numbering)
    if table is None:
        return
    strategy = strategy_picker(table.wild_type, variant_results.dms_variants(data, wild_type, numbering))
    if strategy is None:
        return
    if table.by_sequence and not STRATEGIES[strategy].whole_sequences:
        st.error(f"{plain(name)}: its rows are whole mutated sequences (ProteinGym's indel layout): score them with "
                 f"{' or '.join(names('sequence'))}.", icon=":material/block:")
        return
    tokens = structure_aware.for_strategy(
        structure_aware.structure_choice(ctx.engine, table.wild_type, record_id if wild_type else None), strategy)
    scoring = variant_results.dms_scores(ctx.engine, data, wild_type, numbering, strategy, record_id,
                                         tokens.letters if tokens is not None else None)
    scored = scoring.done
    if scored is None:
        partial_rows(scoring.partial, ["mutant", "DMS_score", "score", "status"])
        return
    notes(scored.notes)
    structure_aware.describe(tokens, numbering)
    if scored.dms.issues:
        with st.expander(f"{counted(len(scored.dms.issues), 'note')} about the table", icon=":material/info:"):
            st.markdown("\n".join(f"- {plain(issue)}" for issue in scored.dms.issues))
    singles = kept_toggle("Single substitutions only (in the statistics and the scatter)", "singles")
    metrics = dms_statistics(scored, visitor_model_name(ctx.model), singles)
    stem = f"{safe_name(record_id)}_{ctx.model_stem}"
    scatter_tab, maps_tab = st.tabs(["Model vs experiment", "Side by side, per position"])
    with scatter_tab:
        show_figure(dms_scatter(scored, metrics, singles), "dms_scatter", f"{stem}_dms_scatter")
    with maps_tab:
        show_figure(dms_heatmaps(scored), "dms_maps", f"{stem}_dms_maps")
    dms_scores_table(scored, table, strategy, f"dms {name} {record_id}")
    row = st.container(horizontal=True)
    with row:
        csv_button("Scored table (CSV)", lambda: output_frame(scored), f"{stem}_dms_{strategy}.csv", "dms_csv",
                   model=ctx.model_name)
        json_button("Metrics (JSON)", lambda: metrics, f"{stem}_dms_{strategy}_metrics.json", "dms_json")
    compare.section(ctx, scored, data, wild_type, numbering, strategy, record_id, singles)


def dms_wild_type(ctx: PageContext, name: str) -> tuple[str | None, Numbering, str] | None:
    """The wild type the table is read against (None: the table's own), its numbering and the id
    its files are named by; None while the chosen record is not ready."""
    if kept_radio("Wild type", "dmswt", horizontal=True) == "record":
        if not ready(ctx):
            return None
        return ctx.sequence, ctx.numbering, ctx.record.id
    return None, Numbering(), Path(name).stem


def checked_dms_table(name: str, data: bytes, wild_type: str | None, numbering: Numbering):
    """The uploaded table read against the wild type, or None when it cannot be (said on the
    page), or when its numbering does not fit and the user did not ask to score it anyway."""
    table = variant_results.dms_table(data, wild_type, numbering)
    if isinstance(table, str):
        hint = (" Choose **the selected record** as the wild type above, with the assay's wild type "
                "(ProteinGym's target_seq) as the record." if wild_type is None and "target_seq" in table else "")
        st.error(plain(f"{name}: {table}") + hint)
        return None
    st.caption(plain(f"{name}: {len(table.frame):,} rows; wild type of {len(table.wild_type):,} residues, "
                     f"{table.wild_type_source}."))
    problem = numbering_problem(table)  # the same stop as flamino dms (exit 2 without --force-offset)
    if problem:
        st.error(plain(f"{name}: {problem}"))
        if not st.checkbox("Score the rows that fit anyway", key="dms_force_offset"):
            return None
    return table


def dms_statistics(scored, model_name: str, singles: bool) -> dict:
    """The row of ProteinGym's statistics and the rows used; returns the metrics."""
    metrics = dms_metrics(scored, model=model_name, singles_only=singles)
    boxes = st.columns(len(STATISTICS) + 1)
    for box, (key, label) in zip(boxes, STATISTICS):
        box.metric(label, "—" if metrics[key] is None else f"{metrics[key]:.3f}")
    left_out = f"{metrics['n_skipped']:,} rows could not be used"
    if metrics["n_excluded"]:
        left_out += f"; {metrics['n_excluded']:,} multi-mutants excluded by the toggle"
    boxes[-1].metric("Rows used", f"{metrics['n_scored']:,}", help=left_out)
    return metrics


def dms_scores_table(scored, table, strategy: str, source: str) -> None:
    """The scored rows, each named by its variant and its positions last, with what the scores
    mean and the rows left out."""
    frame = scored.frame.drop(columns=["mutated_sequence"], errors="ignore")
    if table.by_sequence:  # the row's edit of the wild type names it (indels.from_sequence)
        named = scored.variants["variant"].where(scored.variants["variant"] != "", scored.variants["mutant"])
        frame.insert(0, "mutant", named.to_numpy())
        frame.insert(1, "kind", scored.variants["kind"].to_numpy())
    frame["positions"] = scored.variants["positions"].to_numpy()
    columns = [c for c in frame.columns if c not in ("status", "positions")] + ["positions"]
    numbering = table.numbering
    scores_table(frame, numbering.first, numbering.last(len(table.wild_type)), columns, source=source)
    explain_scores(strategy, scored.variants["kind"])
    skipped(frame)


def main(ctx: PageContext) -> None:
    st.header("Variant effects")
    st.markdown(
        "Score the variants you bring, as ProteinGym scores ESM-2: log p(mutant) − log p(wild type), "
        "natural log; below 0, the model finds the variant less likely than the wild type. "
        "A deep mutational scan is compared with the model's scores (docs/variants.md explains "
        "every score and statistic)."
    )
    if kept_radio("Your variants", "vinput", horizontal=True) == "list":
        list_section(ctx)
        suggestions.section(ctx)
    else:
        dms_section(ctx)


if __name__ == "__main__":  # run by app.py (context.serve), with this rerun's context
    main(current())
