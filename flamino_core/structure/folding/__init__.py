"""A predicted structure (ESMFold) as the app and the command line use it: ``prediction`` (the
fold's memory and time before any work, the hosted length limit, the fold kept in the result
store by model and sequence, its PDB and mmCIF text), ``fold_time`` (a fold's time before the
work, from the platform's first guess and this machine's folds), ``fold_plan`` (a fold as the
background job's plan), ``fold_run`` (many records folded by ``flamino fold``: buckets, the plan
said first, resume) and ``figures`` (the PAE heatmap). The
network itself is ``model/esmfold/``; its weights, ``weights/esmfold.py``.

The door: ``from flamino_core.structure import folding`` then ``folding.fold_memory(...)``.
"""

from __future__ import annotations

from flamino_core.doors import lazy_door

_EXPORTS = {
    **dict.fromkeys(
        ["RANDOM_MODEL", "RANDOM_LABEL", "MAX_FOLD_RESIDUES", "HOSTED_FOLD_RESIDUES", "FIELDS", "FoldMemory", "size",
         "parameter_count", "stem_dense_count", "fold_memory", "hosted_fold_limit", "length_refusal",
         "model_key", "stored_fold", "store_fold", "fold", "predict_stored", "prediction_pdb", "prediction_mmcif",
         "TRAINED_RESIDUES", "PAST_TRAINED_NOTE", "device_fold_limit", "fold_length_limit", "memory_room"],
        "prediction"),
    **dict.fromkeys(["fold_gflop", "FoldSeconds", "fold_time_estimate", "record_fold_time"], "fold_time"),
    "FoldPlan": "fold_plan",
    **dict.fromkeys(["FoldTask", "FoldRunPlan", "plan_run", "run_folds", "done_rows", "file_name"], "fold_run"),
    "pae_heatmap": "figures",
}
__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)
