"""ESMFold (Lin et al., Science 2023): a structure from the sequence. ``model.ESMFold`` is the
network, ``predict.fold_sequence`` folds one sequence, ``weights/esmfold.py`` loads
transformers' ``EsmForProteinFolding`` folders; docs/esmfold.md says what exists."""
