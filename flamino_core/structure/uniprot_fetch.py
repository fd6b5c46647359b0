"""A protein's sequence fetched from UniProt by its accession, when the network allows.

A biologist often has an accession (``P69905``) rather than a sequence; the Structure page already
fetches a model by accession (AlphaFold DB, ``structure/fetch.py``), so the Input page fetches
the sequence the same way: UniProt's REST API answers FASTA for ``/uniprotkb/<accession>.fasta``.
The download goes through the same guarded reader (a timeout, a size cap, http(s) only), and
every failure, offline first, is a ``FetchError`` whose message says what happened and what to
do instead. The base URL is a parameter so tests can point it at a local server.
"""

from __future__ import annotations

import re

from flamino_core.structure.fetch import TIMEOUT_S, UNIPROT_ACCESSION, FetchError, _download

UNIPROT_REST = "https://rest.uniprot.org/uniprotkb"
MAX_FASTA_BYTES = 1024 * 1024  # the longest protein (titin, ~35,000 residues) is ~36 kB of FASTA
MAX_ACCESSIONS = 20  # fetched on one click: a list longer than this is a file's job
_SEPARATORS = re.compile(r"[\s,;]+")


def pasted_accessions(text: str) -> list[str]:
    """The UniProt accessions a pasted text consists of (``P69905``, ``p69905, P68871``), in
    order and once each; [] when any word of it is not one (a sequence, FASTA, a longer list)."""
    words = [w for w in _SEPARATORS.split(text.strip().upper()) if w] if len(text) < 1_000 else []
    if not words or len(words) > MAX_ACCESSIONS or not all(UNIPROT_ACCESSION.match(w) for w in words):
        return []
    return list(dict.fromkeys(words))


def fetch_fasta(accession: str, base_url: str | None = None, timeout: float = TIMEOUT_S) -> str:
    """UniProt's FASTA record of ``accession`` (from ``base_url``, default ``UNIPROT_REST``).

    Raises:
      FetchError: not an accession, no network, no such entry, or an answer that is not FASTA.
    """
    accession = accession.strip().upper()
    if not UNIPROT_ACCESSION.match(accession):
        raise FetchError(f"{accession!r} is not a UniProt accession (like P69905 or A0A023GPI8)")
    what = f"UniProt entry {accession}"
    data = _download(f"{base_url or UNIPROT_REST}/{accession}.fasta", what, timeout, MAX_FASTA_BYTES)
    text = data.decode("utf-8", errors="replace").strip()
    if not text.startswith(">"):
        raise FetchError(f"the answer for {what} is not a FASTA record (it starts {text[:40]!r}); paste the "
                         "sequence from uniprot.org instead")
    return text + "\n"
