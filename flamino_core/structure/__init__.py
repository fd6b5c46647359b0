"""Predicted contacts against a real structure, per-residue tracks on the 3D chain, and predicted
structures (ESMFold).

``files/`` (structure files: ``reading`` with Biopython, its ``limits``, ``amino_acids``: which
residues are read as which letter, ``chain_records``: chains as input records, ``fetch``: RCSB,
AlphaFold DB and UniProt downloads), ``align`` (chain to sequence), ``contact_atoms`` and
``contacts`` (true contacts and precision at L/k), ``three_di`` (Foldseek letters for SaProt),
``tracks`` and ``track_values`` (per-residue values to show), ``export`` (PDB with a track in the
B-factor column, CSV), ``figures`` and ``scene`` (Plotly, the 3D viewer's scene), ``folding/``
(ESMFold's fold as the app and ``flamino fold`` run it). See docs/structure.md.
"""
