"""The variant-effect workbench: the user's mutation lists and deep mutational scans.

``notation`` (ProteinGym and HGVS notation, checked against the sequence), ``scoring`` (the
variant strategies), ``dms`` (ProteinGym DMS tables), ``metrics`` (agreement with the
experiment, as ProteinGym defines it), ``figures`` (Plotly). See docs/variants.md.
"""

from __future__ import annotations

from flamino_core.doors import lazy_door

# The door (doors.py): each name the app imports from this package -> its module here.
_EXPORTS = {
    **dict.fromkeys(["AuthorNumbering", "from_record"], "author_numbering"),
    **dict.fromkeys(["MAX_MODELS", "compare_models"], "compare"),
    **dict.fromkeys(["DmsError", "DmsScores", "DmsTable", "numbering_problem", "output_frame",
                     "parse_dms", "table_variants"], "dms"),
    "mean_of_members": "ensemble",
    **dict.fromkeys(["dms_heatmaps", "dms_scatter", "model_scatter", "variant_map"], "figures"),
    "dms_metrics": "metrics",
    **dict.fromkeys(["Variant", "substitution_names"], "notation"),
    **dict.fromkeys(["ScorePlan", "dms_plan", "list_plan"], "score_plan"),
    **dict.fromkeys(["OK", "RANDOM_WEIGHTS_NOTE", "VariantScores", "filter_scored",
                     "output_columns", "passes_problem"], "scoring"),
    "pass_plan": "sequence_scores",
    **dict.fromkeys(["COLUMN", "with_structure_column", "in_structure_numbers", "relabel_positions",
                     "structure_number"], "structure_numbering"),
    **dict.fromkeys(["from_log_probs", "pseudo_perplexity", "score_rows"], "substitution_maps"),
}
__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)
