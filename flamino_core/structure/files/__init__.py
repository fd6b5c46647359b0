"""Structure files: ``reading`` (PDB/mmCIF with Biopython, a parse's limits in ``limits``;
``amino_acids``: which residues are read as which letter), ``chain_records`` (a structure's
chains as sequence records) and ``fetch`` (a structure by id from the RCSB or AlphaFold DB, a
sequence by accession from UniProt, through one guarded download).
"""
