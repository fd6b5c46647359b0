"""The variant-effect workbench: the user's mutation lists and deep mutational scans.

``notation`` (ProteinGym and HGVS notation, checked against the sequence), ``scoring`` (the
variant strategies), ``dms`` (ProteinGym DMS tables), ``metrics`` (agreement with the
experiment, as ProteinGym defines it), ``figures`` (Plotly). See docs/variants.md.
"""
