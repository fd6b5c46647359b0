"""What the app's pages share, one module per concern (no JAX at import; see each docstring).

- ``views``: the registry of pages and their shareable options.
- ``widgets``: kept widgets (``kept_selectbox`` ...) and user text shown verbatim (``plain``).
- ``links``: the link codec; ``session``: a session's start from its link and its published link.
- ``policy``: what this server allows (limits, models, names visitors see); ``heavy_jobs``: the
  first-come-first-served queue for heavy jobs.
- ``inputs``: the input (read once per rerun), its validation, the chosen record and its picker.
- ``numbering``: the first residue's number, a hosted window of a long record; ``ranges``: the
  residues a page shows; ``context``: the page context ``app.py`` computes once per rerun.
- ``background`` and ``jobs_panel``: long work as background jobs (cost first, progress, Cancel,
  the sidebar's list); ``scans`` and ``set_results``: masked scans and a set's results through
  the result store; ``record_search``: finding records of a set.
- ``model_picker``: the sidebar's model picker; ``models``: loading, failures, the banner.
- ``results``: one record's model results (through the store, or cached; the heavy ones queued).
- ``downloads``: figures and their downloads, CSV and NPZ buttons.
"""
