"""Predicted contacts against a real structure, per-residue tracks on the 3D chain, and predicted
structures (ESMFold).

``files/`` (structure files: ``reading`` with Biopython, its ``limits``, ``amino_acids``: which
residues are read as which letter, ``chain_records``: chains as input records, ``fetch``: RCSB,
AlphaFold DB and UniProt downloads), ``align`` (chain to sequence), ``contact_atoms`` and
``contacts`` (true contacts and precision at L/k), ``three_di`` (Foldseek letters for SaProt),
``confidence`` (pLDDT's fixed bands), ``tracks`` and ``track_values`` (per-residue values to
show), ``export`` (PDB with a track in the B-factor column, CSV), ``figures`` and ``scene``
(Plotly, the 3D viewer's scene), ``folding/`` (ESMFold's fold as the app and ``flamino fold``
run it). See docs/structure.md.
"""

from __future__ import annotations

from flamino_core.doors import lazy_door

# The door (doors.py): each name the app imports from this package -> its module here.
_EXPORTS = {
    **dict.fromkeys(["ChainAlignment", "choose_chain"], "align"),
    **dict.fromkeys(["PLDDT_BANDS", "band_counts", "band_index", "plddt_colours"], "confidence"),
    **dict.fromkeys(["CUTOFFS", "precision_by_model", "top_predictions", "true_contacts"], "contacts"),
    **dict.fromkeys(["pdb_export_problem", "pdb_with_track", "precision_csv"], "export"),
    **dict.fromkeys(["contact_comparison_map", "structure_trace_3d"], "figures"),
    **dict.fromkeys(["chain_records", "looks_like_structure", "records_fasta",
                     "structure_records"], "files.chain_records"),
    **dict.fromkeys(["FetchError", "fetch_fasta", "pasted_accessions"], "files.fetch"),
    "BYTES_PER_ATOM": "files.limits",
    **dict.fromkeys(["MAX_STRUCTURE_BYTES", "ParsedStructure", "StructureError", "count_atom_lines",
                     "parse_structure_bytes", "read_structure"], "files.reading"),
    "pae_heatmap": "folding.figures",
    **dict.fromkeys(["MolecularScene", "molecular_scene"], "scene"),
    **dict.fromkeys(["StructureTokens", "is_predicted_structure", "structure_tokens"], "three_di"),
    **dict.fromkeys(["NEEDS", "PARAMS", "Param", "TRACKS", "check_choices", "compute_choices",
                     "compute_track", "track_inputs", "track_label"], "tracks"),
}
__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)
