"""NumPy analyses of model outputs: ``outputs`` (the one log-softmax, probabilities, entropy,
top-k, PCA, attention views), ``attention_maps`` (APC, symmetrising), ``contact_pairs`` (predicted
contacts as tables of residue pairs).
"""

from __future__ import annotations

from flamino_core.doors import lazy_door

# The door (doors.py): each name the app imports from this package -> its module here.
_EXPORTS = {
    **dict.fromkeys(["apc", "symmetrize"], "attention_maps"),
    **dict.fromkeys(["contacts_frame", "top_contacts_frame"], "contact_pairs"),
    **dict.fromkeys(["amino_acid_probabilities", "attention_view", "crop_square", "entropy",
                     "log_softmax", "pca", "residue_class", "residue_labels", "strip_special",
                     "token_distribution", "top_k_rows"], "outputs"),
}
__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)
