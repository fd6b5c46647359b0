"""Fetch a structure by PDB id (RCSB) or UniProt accession (AlphaFold DB), and a protein's
sequence by its UniProt accession (rest.uniprot.org), when the network allows.

Every download has a timeout and a size cap, and every failure (offline, unknown id, too large,
not a structure) is a ``FetchError`` with a message that says what to do instead: download the
file elsewhere and upload it. The base URLs are parameters so tests can point them at a local
server.

A biologist often has an accession (``P69905``) rather than a sequence: the Input page fetches
the sequence the way the Structure page fetches a model (``fetch_fasta``: UniProt answers FASTA
for ``/uniprotkb/<accession>.fasta``), through the same guarded reader, one module for both.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request

from flamino_core.structure.files.reading import (
    MAX_STRUCTURE_BYTES, ParsedStructure, StructureError, parse_structure_bytes,
)

RCSB_URL = "https://files.rcsb.org/download"
ALPHAFOLD_API = "https://alphafold.ebi.ac.uk/api/prediction"
TIMEOUT_S = 20.0
MAX_DOWNLOAD_BYTES = 50 * 1024 * 1024  # compressed or not; large assemblies belong in an upload
PDB_ID = re.compile(r"^[0-9][A-Za-z0-9]{3}$")
# UniProt's published accession pattern (https://www.uniprot.org/help/accession_numbers).
UNIPROT_ACCESSION = re.compile(r"^([OPQ][0-9][A-Z0-9]{3}[0-9]|[A-NR-Z][0-9]([A-Z][A-Z0-9]{2}[0-9]){1,2})$")
USER_AGENT = "flamino (structure fetch)"
_INSTEAD = "download the file in a browser and upload it instead"
UNIPROT_REST = "https://rest.uniprot.org/uniprotkb"
MAX_FASTA_BYTES = 1024 * 1024  # the longest protein (titin, ~35,000 residues) is ~36 kB of FASTA
MAX_ACCESSIONS = 20  # fetched on one click: a list longer than this is a file's job
_SEPARATORS = re.compile(r"[\s,;]+")


class FetchError(StructureError):
    """A download that did not give a structure; the message says why and what to do."""


def fetch_pdb(
    pdb_id: str, base_url: str = RCSB_URL, timeout: float = TIMEOUT_S, max_bytes: int = MAX_DOWNLOAD_BYTES,
    read_limits: dict[str, int | None] | None = None,
) -> ParsedStructure:
    """Download an entry from the RCSB PDB as gzipped mmCIF and parse it.

    Args:
      pdb_id: a four-character PDB id such as ``1GBT`` (case does not matter).
      base_url, timeout, max_bytes: where from, how long to wait (seconds, per network
        operation), and the largest download accepted.
      read_limits: keyword arguments for ``parse_structure_bytes`` (``max_bytes`` inflated,
        ``max_atoms``, ``max_models``); None: its defaults.

    Raises:
      FetchError: a malformed id, no network, no such entry, a download too large, or content
        that is not a structure.
    """
    pdb_id = pdb_id.strip()
    if not PDB_ID.match(pdb_id):
        raise FetchError(f"{pdb_id!r} is not a PDB id: four characters, the first a digit (like 1GBT)")
    # mmCIF, not PDB format: entries too large for the PDB format exist only as mmCIF.
    name = f"{pdb_id.upper()}.cif.gz"
    data = _download(f"{base_url}/{name}", f"PDB entry {pdb_id.upper()}", timeout, max_bytes)
    return _parse_download(data, name, read_limits)


def fetch_alphafold(
    accession: str, base_url: str = ALPHAFOLD_API, timeout: float = TIMEOUT_S, max_bytes: int = MAX_DOWNLOAD_BYTES,
    read_limits: dict[str, int | None] | None = None,
) -> ParsedStructure:
    """Download the AlphaFold DB model of a UniProt accession and parse it.

    The AlphaFold DB API is asked for the entry first: it names the current model file, so a new
    database version does not break the link. The model's pLDDT sits in its B-factor column.

    Raises:
      FetchError: as for ``fetch_pdb``.
    """
    accession = accession.strip().upper()
    if not UNIPROT_ACCESSION.match(accession):
        raise FetchError(f"{accession!r} is not a UniProt accession (like P69905 or A0A023GPI8)")
    what = f"AlphaFold DB entry {accession}"
    raw = _download(f"{base_url}/{accession}", what, timeout, min(max_bytes, 1024 * 1024))
    try:
        entries = json.loads(raw)
        url = next(entry.get("cifUrl") or entry["pdbUrl"] for entry in entries)
    except (ValueError, KeyError, TypeError, StopIteration, AttributeError):
        raise FetchError(f"the AlphaFold DB answer for {accession} names no model file; {_INSTEAD}") from None
    data = _download(url, what, timeout, max_bytes)
    return _parse_download(data, url.rsplit("/", 1)[-1] or accession, read_limits)


def _download(url: str, what: str, timeout: float, max_bytes: int) -> bytes:
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc
    if parts.scheme not in ("http", "https"):  # never file:, ftp: ... from a server's answer
        raise FetchError(f"will not download {what} from {url!r}: only http and https links are followed")
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            declared = response.headers.get("Content-Length")
            if declared and declared.isascii() and declared.isdigit() and int(declared) > max_bytes:
                raise FetchError(_too_large(what, int(declared), max_bytes))
            data = _read_capped(response, max_bytes, deadline=time.monotonic() + 3 * timeout)
            # http.client returns a short body without complaint when the server hangs up early.
            if declared and declared.isascii() and declared.isdigit() and len(data) < int(declared):
                raise http.client.IncompleteRead(data, int(declared) - len(data))
    except FetchError:
        raise
    except urllib.error.HTTPError as err:
        if err.code == 404:
            raise FetchError(f"{what} was not found at {host}") from None
        raise FetchError(f"{host} answered {err.code} {err.reason} for {what}; try later or {_INSTEAD}") from None
    except (TimeoutError, socket.timeout):
        raise FetchError(f"{host} did not send {what} in time (timeout {timeout:g} s); {_INSTEAD}") from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise FetchError(
            f"could not reach {host} to fetch {what} ({reason}); this machine may be offline: {_INSTEAD}"
        ) from None
    except http.client.HTTPException as err:  # e.g. the connection closed mid-download
        raise FetchError(f"the download of {what} from {host} broke off ({type(err).__name__}); {_INSTEAD}") from None
    except ValueError:  # a URL urllib cannot open (an odd link in the AlphaFold DB answer)
        raise FetchError(f"cannot download {what} from {url!r}; {_INSTEAD}") from None
    if len(data) > max_bytes:
        raise FetchError(_too_large(what, None, max_bytes))
    return data


def _read_capped(response, max_bytes: int, deadline: float) -> bytes:
    """At most ``max_bytes + 1`` bytes, whatever the header said, and within a total deadline:
    the socket timeout alone would let a server that trickles bytes hold the request forever."""
    chunks, size = [], 0
    while size <= max_bytes:
        chunk = response.read(min(64 * 1024, max_bytes + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if time.monotonic() > deadline:
            raise TimeoutError
    return b"".join(chunks)


def _too_large(what: str, size: int | None, max_bytes: int) -> str:
    size_text = f"{size:,} bytes" if size is not None else "more than that"
    return f"{what} is larger than the {max_bytes:,}-byte download limit ({size_text}); {_INSTEAD}"


def _parse_download(data: bytes, name: str, read_limits: dict[str, int | None] | None) -> ParsedStructure:
    try:
        return parse_structure_bytes(data, name, **(read_limits or {"max_bytes": MAX_STRUCTURE_BYTES}))
    except StructureError as err:
        raise FetchError(f"the download is not a usable structure: {err}") from None


# --- a sequence from UniProt ---------------------------------------------------------------------
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


REACHABLE_FOR_S = 60.0  # how long one answer of ``reachable`` is kept (a page reruns often)
_reachable: dict[str, tuple[float, bool]] = {}


def reachable(base_url: str | None = None, timeout: float = 2.0) -> bool:
    """Whether the host of ``base_url`` (default UniProt's REST service) takes a connection now:
    the Input page offers "Fetch from UniProt" only then, instead of a button whose every press
    says to download elsewhere (#66 D11). One answer per URL is kept ``REACHABLE_FOR_S``."""
    url = urllib.parse.urlparse(base_url or UNIPROT_REST)
    now = time.monotonic()
    kept = _reachable.get(url.geturl())
    if kept is not None and now - kept[0] < REACHABLE_FOR_S:
        return kept[1]
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            answer = True
    except OSError:
        answer = False
    _reachable[url.geturl()] = (now, answer)
    return answer
