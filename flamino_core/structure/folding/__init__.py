"""A predicted structure (ESMFold) as the app and the command line use it: ``prediction`` (the fold's
memory and time before any work, the hosted length limit, the fold kept in the result store by model
and sequence, its PDB and mmCIF text), ``fold_time`` (a fold's time before the work, from the
platform's first guess and this machine's folds), ``fold_plan`` (a fold as the background job's
plan), ``fold_run`` (many records folded by ``flamino fold``: buckets, the plan said first, resume),
``fold_files`` (one record folded into its PDB file and table row, for ``flamino fold`` and
``flamino batch fold`` alike; the run's length limit), ``fold_worker`` (a server's folds in a
process of their own), ``variant_structures`` (a variant's fold superposed on the wild type's) and
``figures`` (the PAE heatmap, pLDDT along the sequence in its bands); for ESMFold2's complexes
``complex_prediction`` (model, key, limits, memory, time, store), ``complex_plan`` (the job's plan)
and ``complex_figures`` (PAE with chain blocks, the ipTM table, the 3D scene by chain or pLDDT). The
network itself is ``model/esmfold/`` (``model/esmfold2/``); its weights, ``weights/esmfold.py``.

The door: ``from flamino_core.structure import folding`` then ``folding.fold_memory(...)``.
"""

from __future__ import annotations

from flamino_core.doors import lazy_door

_EXPORTS = {
    **dict.fromkeys(
        ["RANDOM_MODEL", "RANDOM_LABEL", "MAX_FOLD_RESIDUES", "HOSTED_FOLD_RESIDUES", "FIELDS", "FoldMemory",
         "parameter_count", "stem_dense_count", "fold_memory", "hosted_fold_limit", "length_refusal", "time_refusal",
         "model_key", "stored_fold", "store_fold", "fold", "predict_stored", "prediction_pdb", "prediction_mmcif",
         "TRAINED_RESIDUES", "PAST_TRAINED_NOTE", "device_fold_limit", "fold_length_limit", "memory_room"],
        "prediction"),
    **dict.fromkeys(["fold_gflop", "FoldSeconds", "fold_time_estimate", "record_fold_time", "fold_platform"],
                    "fold_time"),
    **dict.fromkeys(["FoldPlan", "FoldOverBudget"], "fold_plan"),
    **dict.fromkeys(["FoldTask", "FoldRunPlan", "plan_run", "run_folds", "done_rows", "file_name"], "fold_run"),
    **dict.fromkeys(["FoldSettings", "fold_record", "write_table", "known_config", "run_length_limit"],
                    "fold_files"),
    **dict.fromkeys(["FoldRequest", "FoldRunner", "fold_runner", "fold_share", "runner_for", "warm_express"],
                    "fold_worker"),
    **dict.fromkeys(["CAVEAT", "substitution_variants", "fold_variants", "both_chains_pdb", "superposed_pdb",
                     "table_csv"], "variant_structures"),
    **dict.fromkeys(["pae_heatmap", "plddt_track", "variant_structure_tracks"], "figures"),
    **dict.fromkeys(["RANDOM_MODEL2", "RANDOM_LABEL2", "is_random", "complex_label", "complex_config", "complex_key",
                     "complex_sequence", "complex_refusal", "complex_memory", "complex_time_estimate",
                     "stored_complex", "store_complex", "chain_letters", "complex_problem",
                     "stem_precision_plan"], "complex_prediction"),
    **dict.fromkeys(["ComplexPlan", "ComplexRequest", "predict_complex_stored", "load_complex_model"], "complex_plan"),
    **dict.fromkeys(["complex_pae_heatmap", "iptm_table", "complex_scene", "chain_colours",
                     "confidences_json", "pdb_problem", "complex_mmcif", "complex_pdb"], "complex_figures"),
}
__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)
