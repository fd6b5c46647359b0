"""Predicted contacts against a real structure, and per-residue tracks on the 3D chain.

``reading`` (PDB/mmCIF with Biopython; ``amino_acids``: which
residues are read as which letter), ``align`` (chain to sequence), ``contacts`` (true
contacts and precision at L/k), ``tracks`` (per-residue values to show), ``export`` (PDB with a
track in the B-factor column, CSV), ``figures`` (Plotly), ``fetch`` (RCSB / AlphaFold DB).
See docs/structure.md.
"""
