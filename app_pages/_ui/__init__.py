"""What the app's pages share, one module per concern (no JAX at import; see each docstring).

- ``views``: the registry of pages and their shareable options.
- ``widgets``: kept widgets (``kept_selectbox`` ...) and user text shown verbatim (``plain``).
- ``links``: the link codec; ``session``: a session's start from its link and its published link.
- ``policy``: what this server allows (limits, models, names visitors see); ``heavy_jobs``: the
  first-come-first-served queue for heavy jobs.
- ``inputs``: the input, its validation, the records and the selected one, ``first_number``.
- ``numbering``: the first residue's number, a hosted window of a long record; ``ranges``: the
  residues a page shows; ``scans``: masked scans as background jobs through the result store (``background``, ``jobs_panel``, ``set_results`` for a set).
- ``model_picker``: the sidebar's model picker; ``models``: loading, failures, the banner.
- ``results``: cached model results (and the heavy ones queued).
- ``downloads``: figures and their downloads, CSV and NPZ buttons.
"""
