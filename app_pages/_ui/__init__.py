"""What the app's pages share, one folder per concern (no JAX at import; see each docstring).

- ``frame``: the registry of pages and their shareable options (``views``), kept widgets and user
  text shown verbatim (``widgets``), the link codec (``links``), figures and their downloads
  (``downloads``), the docs' passages opened in place (``docs``).
- ``rerun``: the page context ``app.py`` computes once per rerun (``context``), a session's start
  from its link and its published link (``session``), the residues a page shows (``ranges``).
- ``input``: the input read once per rerun, its validation, the chosen record and the examples
  (``reading``, ``uploads``), the first residue's number and a hosted window of a long record
  (``numbering``), the sidebar's model picker and the engine's loading (``model_picker``,
  ``model_loading``).
- ``server``: what this server allows (``policy``), the queue for heavy
  jobs (``heavy_jobs``), long work as background jobs with its cost first, progress, Cancel and
  the sidebar's list (``background``, ``jobs_panel``), a byte-bounded cache (``byte_cache``).
- ``results``: one record's model results through the store or cached (``one_record``), masked
  scans (``scans``).
- ``records``: a set's results through the store (``set_results``), its map and the comparison
  of models (``set_map``, ``compare_maps``), finding records (``search``).
- ``variants``, ``structure``, ``predict_from_labels``: each page's own helpers (the Variant
  effects page; the Structure page with its viewer and ESMFold prediction; the Predict page's fit
  and design rounds).
"""
