"""The Structure page's structure and what the page computes from it.

Where a structure comes from (an upload here or on the Input page, a file on this machine, a
download by PDB id or UniProt accession), holding it for the session, its chains as records (a
structure uploaded on the Input page gives one record per protein chain, and the page opens on
the record's own chain; "use this chain's sequence" makes a chain the analysed record), the
chain's alignment (cached), the contacts of every
model run on the page this session (for the precision table by model), and the per-residue
track values from the cached model results.

The parsed structure lives in session state, so it survives page switches; flamino never
modifies it (exports work on copies). Uploads are parsed once per content for every session
(a cache keyed by the bytes' hash, bounded by the memory the parsed structures hold). A file
that is not a structure, a refused path
or a failed download is a message under the source widgets, never a traceback. Hosted mode
(``policy.py``) offers no local paths; downloads are allowed, capped at the upload size.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import uuid
from pathlib import Path

import numpy as np
import streamlit as st

from flamino_core import settings
from flamino_core.variants import from_log_probs
from flamino_core.model import MAX_RESIDUES
from flamino_core.numbering import Numbering
from flamino_core.options import STRATEGIES
from flamino_core.structure.files import fetch
from flamino_core.structure import (BYTES_PER_ATOM, ChainAlignment, ParsedStructure, StructureError, TRACKS,
                                    chain_records, check_choices, choose_chain, compute_choices,
                                    compute_track, looks_like_structure, parse_structure_bytes,
                                    read_structure, records_fasta, structure_records, track_inputs,
                                    track_label)

from app_pages._ui.results import one_record as results, scans
from app_pages._ui.server.byte_cache import ByteBudgetCache
from app_pages._ui.server import heavy_jobs
from app_pages._ui.server.heavy_jobs import HEAVY_RESIDUES
from app_pages._ui.input import uploads
from app_pages._ui.input.reading import pick_record, upload_limit_words, upload_size_mb
from app_pages._ui.server.policy import current_limits, hosted_mode, visitor_model_name
from app_pages._ui.frame.widgets import kept_text_input, plain

# Session-state keys.
STRUCTURE = "_structure"  # (ParsedStructure, cache key, where it came from)
PROBLEM = "_structure_problem"  # why the last upload / path / download gave no structure
UPLOAD = "_structure_upload"
PATH = "structure_path"  # kept text inputs
FETCH_ID = "structure_fetch_id"
LINK_ID = "sid"  # the downloaded structure's id, which links carry (views.OPTIONS)
LINK_ID_TRIED = "_sid_tried"  # the link's id was downloaded once (a failure is not retried on every run)
LINK_FAILED = "_sid_failed"  # the problem shown is the link's download failing (a warning, not an error)
INPUT_FILE = "_structure_input_file"  # the Input page's upload the structure came from, if it did
CHAINS = "_structure_chains"  # (the structure's key, {record id: chain id}): the records made of its chains
SEEN_CONTACTS = "_structure_contacts"  # (model, sequence) -> (L, L) contacts, oldest first
MAX_SEEN = 6  # contact maps kept per session: at 2,000 residues each is 16 MB


# Parsed uploads shared by every session, bounded by the memory they hold (byte_cache.py).
PARSED_BUDGET_BYTES = settings.STRUCTURE_CACHE_BYTES.get() or (256_000_000 if hosted_mode() else 2_000_000_000)
_PARSED: ByteBudgetCache[ParsedStructure] = ByteBudgetCache(PARSED_BUDGET_BYTES)


# --- where the structure comes from ------------------------------------------------------------
def _parse_upload(digest: str, name: str, data: bytes, spinner: bool = True) -> ParsedStructure:
    """One parse per file content, shared by every session (never modified: see the module doc),
    within this server's limits on inflated size, atoms, models and chains. Keyed by the content
    alone: 16 copies of one 78,000-atom file in one upload, each named apart, were 16 parses
    (141 s); the copy returned carries this upload's name (the structure itself is shared)."""
    def parse() -> ParsedStructure:
        with st.spinner("Reading the structure…") if spinner else contextlib.nullcontext():
            return parse_structure_bytes(data, name, **current_limits().structure_limits())

    parsed = _PARSED.get_or_make(digest, parse, lambda parsed: _atoms(parsed) * BYTES_PER_ATOM)
    return parsed if parsed.name == name else dataclasses.replace(parsed, name=name)


def _atoms(parsed: ParsedStructure) -> int:
    return sum(1 for _ in parsed.structure.get_atoms())


def _hold(parsed: ParsedStructure, key: str, origin: str, link_id: str | None = None,
          input_file: str | None = None) -> None:
    """Hold a structure; ``link_id``: the id a link can download it by again (None: an upload or a
    path, which no link can carry); ``input_file``: the Input page's upload it came from."""
    st.session_state[STRUCTURE] = (parsed, key, origin)
    st.session_state[LINK_ID] = link_id
    st.session_state[INPUT_FILE] = input_file
    st.session_state.pop(PROBLEM, None)


def hold(parsed: ParsedStructure, key: str, origin: str) -> None:
    """Hold a structure made on this page (a prediction): shown and used as an upload is."""
    _hold(parsed, key, origin)


def take_input_structure(name: str, data: bytes) -> tuple[str, str] | None:
    """The Input page's uploader's reader of structures (``uploads.StructureReader``): a PDB or
    mmCIF file becomes its protein chains' records (FASTA, read by the one validator) and is held
    for this page, which then opens on the record's chain; None for a file that is not one.

    Raises:
      ValueError: the structure cannot be read (the reader's words) or holds no protein chain.
    """
    if not looks_like_structure(data):
        return None
    digest = hashlib.sha256(data).hexdigest()
    # The command line reads a structure given as FASTA through the same structure_records.
    found = structure_records(_parse_upload(digest, name, data, spinner=False))  # StructureError is a ValueError
    _hold(found.parsed, digest, f"uploaded on the Input page as {name}", input_file=name)
    st.session_state[CHAINS] = (digest, {chain.record.id: chain.chain_id for chain in found.chains})
    return found.fasta, found.describe()


def record_chain(record_id: str) -> str | None:
    """The chain of the held structure that the record ``record_id`` was made of, or None."""
    found = held()
    chains = st.session_state.get(CHAINS)
    if found is None or chains is None or chains[0] != found[1]:
        return None
    return chains[1].get(record_id)


def use_chain(chain_id: str, model_index: int, existing: dict[str, str]) -> None:
    """"Use this chain's sequence" (a callback): the chain of the held structure as a record of
    the input (kept like an uploaded file, removable on the Input page), chosen for every page.

    Args:
      existing: the input's records (id -> sequence): a record of the chain already there is chosen.
    """
    parsed, key, _ = held()
    chain = next(c for c in chain_records(parsed, model_index) if c.chain_id == chain_id)
    record = chain.record
    if existing.get(record.id) != record.sequence:
        uploads.keep(f"{parsed.name} chain {chain_id}", records_fasta((chain,)).encode(),
                     f"chain {chain_id} of the structure on the Structure page")
    mapping = st.session_state.get(CHAINS)
    chains = dict(mapping[1]) if mapping is not None and mapping[0] == key else {}
    st.session_state[CHAINS] = (key, {**chains, record.id: chain_id})
    pick_record(record.id)


def _refuse(message: str) -> None:
    """Say why; a structure read before stays (the caption says which one is shown)."""
    st.session_state[PROBLEM] = message
    st.session_state.pop(LINK_FAILED, None)


def take_upload() -> None:
    """The uploader's callback: parse the new file (removing it keeps the structure)."""
    file = st.session_state.get(UPLOAD)
    if file is None:
        return
    too_big = current_limits().check_upload(file.size, file.name)
    if too_big:
        _refuse(too_big)
        return
    data = file.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    try:
        _hold(_parse_upload(digest, file.name, data), digest, f"uploaded file {file.name}")
    except StructureError as err:
        _refuse(str(err))


def open_path() -> None:
    """The Open button's callback: a file on this machine (never offered in hosted mode)."""
    if not current_limits().allow_local_paths:
        _refuse("This server does not open files by path; upload the file instead.")
        return
    path = st.session_state.get(PATH, "").strip()
    try:
        parsed = read_structure(Path(path).expanduser(), **current_limits().structure_limits())
        _hold(parsed, f"path:{uuid.uuid4().hex}", f"file {path}")
    except StructureError as err:
        _refuse(str(err))


def download(identifier: str) -> None:
    """Fetch a PDB entry (RCSB) or an AlphaFold DB model, with the core's timeout and size cap."""
    identifier = identifier.strip()
    st.session_state[LINK_ID_TRIED] = identifier
    limit = current_limits().max_upload_bytes  # hosted: no larger than an upload may be
    cap = fetch.MAX_DOWNLOAD_BYTES if limit is None else min(limit, fetch.MAX_DOWNLOAD_BYTES)
    read_limits = current_limits().structure_limits()
    try:
        with heavy_jobs.fetch_turn():  # bounded, one per visitor (issue #67)
            parsed, origin, link_id = _fetched(identifier, cap, read_limits)
    except heavy_jobs.QueueFull as err:
        _refuse(f"Not downloaded: {err}.")
        return
    except StructureError as err:  # FetchError: offline, not found, too large, not a structure
        _refuse(str(err))
        return
    if parsed is not None:
        _hold(parsed, f"fetch:{uuid.uuid4().hex}", origin, link_id)


def _fetched(identifier: str, cap: int, read_limits: dict) -> tuple:
    """(the structure, its origin in words, its link id) of a PDB id or UniProt accession; (None, …)
    after saying why not."""
    if fetch.PDB_ID.match(identifier):
        parsed = fetch.fetch_pdb(identifier, base_url=fetch.RCSB_URL, max_bytes=cap, read_limits=read_limits)
        return parsed, f"PDB entry {identifier.upper()} (RCSB)", identifier.upper()
    if fetch.UNIPROT_ACCESSION.match(identifier.upper()):
        parsed = fetch.fetch_alphafold(identifier, base_url=fetch.ALPHAFOLD_API, max_bytes=cap,
                                       read_limits=read_limits)
        return parsed, f"AlphaFold DB model of {identifier.upper()}", identifier.upper()
    _refuse(f"{identifier!r} is neither a PDB id (like 1GBT) nor a UniProt accession (like P69905).")
    return None, None, None


def follow_link() -> None:
    """A link made from a downloaded structure carries its id: download it again, once."""
    ss = st.session_state
    wanted = ss.get(LINK_ID)
    if wanted and held() is None and ss.get(LINK_ID_TRIED) != wanted:
        with st.spinner(f"Downloading {wanted}, the structure the link was made with…"):
            download(wanted)
        if PROBLEM in ss:  # the visitor did nothing wrong: a warning, and what to do
            ss[PROBLEM] = (f"The link's structure {wanted} could not be downloaded here: {ss[PROBLEM]} "
                           "Upload the file instead, or try the download again.")
            ss[LINK_FAILED] = True
        ss[LINK_ID] = wanted  # kept in the link while the download failed, so it can be tried again


def link_note() -> str:
    """What the share link does with the structure shown, for the share panel."""
    found = held()
    if found is None:
        return ""
    if found[1].startswith("fold:"):  # prediction.hold's key
        # offer() holds a stored fold at once: on this server the recipient sees it with no click.
        return ("The link does not carry the predicted structure, but this server keeps it: whoever opens the link "
                "here sees it again at once (read back from the store for the same fold model and sequence, not "
                "folded again); on another server, Predict folds it there.")
    if st.session_state.get(INPUT_FILE):
        return ("The link carries the chains' sequences as records, not the structure file: whoever opens it "
                "uploads the file again (here or on the Input page) to see the structure.")
    if st.session_state.get(LINK_ID):
        return (f"The link carries the structure's id ({st.session_state[LINK_ID]}): "
                "it is downloaded again when the link is opened.")
    return ("The link does not carry the structure file (an upload, or a file on this machine): whoever opens it "
            "sees the page without the structure and uploads the file again (the chain, track and other choices "
            "are kept).")


def source_panel() -> None:
    """Upload, a path (not in hosted mode) and a download, side by side, and the last problem."""
    follow_link()
    local = current_limits().allow_local_paths
    columns = st.columns(3 if local else 2, vertical_alignment="bottom")
    with columns[0]:
        # Any file type on purpose: the reader then says what a FASTA file or a PDF is.
        st.file_uploader(
            f"PDB or mmCIF file (gzipped .gz accepted){upload_limit_words()}",
            key=UPLOAD,
            on_change=take_upload,
            max_upload_size=upload_size_mb(),
        )
    if local:
        with columns[1]:
            path = kept_text_input("…or a file on this machine", PATH, placeholder="/data/1gbt.cif.gz")
            st.button("Open", on_click=open_path, disabled=not path.strip(), icon=":material/folder_open:")
    with columns[-1]:
        identifier = kept_text_input(
            "…or download by PDB id or UniProt accession (AlphaFold DB)", FETCH_ID, placeholder="1GBT or P69905"
        )
        if st.button("Download", disabled=not identifier.strip(), icon=":material/cloud_download:"):
            with st.spinner(f"Downloading {identifier.strip()}…"):
                download(identifier)
    if PROBLEM in st.session_state:
        show = st.warning if st.session_state.get(LINK_FAILED) else st.error
        show(plain(st.session_state[PROBLEM]), icon=":material/error:")


def held() -> tuple[ParsedStructure, str, str] | None:
    """(structure, cache key, where it came from) of this session, or None. A structure uploaded
    on the Input page goes with its file: removed there, it is no longer shown here."""
    ss = st.session_state
    name = ss.get(INPUT_FILE)
    if name is not None and all(upload.name != name for upload in uploads.files()):
        for key in (STRUCTURE, INPUT_FILE, CHAINS):
            ss.pop(key, None)
    return ss.get(STRUCTURE)


# --- what the page computes ----------------------------------------------------------------------
@st.cache_data(show_spinner=False, max_entries=32)
def alignment(key: str, sequence: str, chain_id: str | None, model_index: int,
              _parsed: ParsedStructure) -> ChainAlignment:
    """``choose_chain`` for the held structure (``key`` stands for it); a StructureError is not cached."""
    return choose_chain(_parsed, sequence, chain_id, model_index)


def remember_contacts(model: str, sequence: str, contacts: np.ndarray) -> None:
    """Keep a model's contacts for the table by model (the oldest go past ``MAX_SEEN``)."""
    seen = st.session_state.setdefault(SEEN_CONTACTS, {})
    seen[(model, sequence)] = contacts  # an update keeps the model's place in the table
    while len(seen) > MAX_SEEN:
        seen.pop(next(iter(seen)))


def contacts_by_model(sequence: str) -> dict[str, np.ndarray]:
    """Model -> contacts of ``sequence``, for every model run on the page this session."""
    seen = st.session_state.get(SEEN_CONTACTS, {}).items()
    return {visitor_model_name(model): c for (model, seq), c in seen if seq == sequence}  # no server path


def track_values(name: str, engine, sequence: str, contacts: np.ndarray | None, choice: dict,
                 numbering: Numbering = Numbering(), structure: str | None = None) -> tuple[np.ndarray | None, str]:
    """(L,) values of a track and its label, from what its declaration says it needs
    (``structure.tracks``: the choices checked, the model outputs from ``track_inputs``); None
    while a queued result is unavailable (``results.heavy`` has said why).

    Args:
      choice: the track's choices as people count them (``tracks.check_choices``' terms: the
        residue 1-based, no head for the mean of heads).
      numbering: the record's residue numbering, for the label.
      structure: a structure-aware model's 3Di letters for the masked scan (score tracks).

    Raises:
      ValueError: a choice that does not fit (a residue beyond the attention maps).
    """
    spec = TRACKS[name]
    if "contacts" in spec.needs and contacts is None:
        return None, ""
    config = engine.config
    checked = check_choices(name, choice, layers=config.num_layers, heads=config.attention_heads)
    layer, strategy = checked.get("layer"), checked.get("strategy")
    have = {"contacts": contacts} if "contacts" in spec.needs else {}
    if "scores" in spec.needs and STRATEGIES[strategy].masked:
        # The page's own scan of the whole sequence, a background job through the result store:
        # its cost said before a long one (never started by a link alone), cancellable (scans.py).
        log_probs = scans.masked_scan(engine, sequence, range(len(sequence)), "the whole sequence",
                                      f"the {name} track", structure=structure)
        if log_probs is None:
            return None, ""
        have["scores"] = from_log_probs(log_probs, sequence, strategy).substitutions
    found = results.heavy(_track_inputs, engine.fingerprint, sequence, name, layer, strategy, tuple(have), engine,
                          what=f"the {name} track")
    if found is None:
        return None, ""
    shown, inputs = found
    inputs = {**inputs, **have}
    picked = compute_choices(name, check_choices(name, checked, length=len(shown)))
    values = compute_track(name, shown, **inputs, **picked)
    values = np.pad(values, (0, len(sequence) - len(shown)), constant_values=np.nan)  # no value past the maps
    return values, track_label(name, numbering=numbering, layer=layer, strategy=strategy, **picked)


@st.cache_data(show_spinner="Running the model for the track…", max_entries=8)
def _track_inputs(model: str, sequence: str, name: str, layer: int | None, strategy: str | None,
                  held: tuple[str, ...], _engine):
    """(the residues covered, the track's model inputs but the ``held`` ones, which the page has):
    ``tracks.track_inputs``, cached by the engine's fingerprint (``model``). Attention maps of a
    sequence over 1022 residues cover its first 1022
    (maps cannot be stitched from windows); those of a long sequence wait in the heavy-job
    queue, as the cached attention maps this replaced did."""
    needs = TRACKS[name].needs
    long = "truncate" if "attention" in needs and len(sequence) > MAX_RESIDUES else "window"
    costly = "attention" in needs and len(sequence) > HEAVY_RESIDUES
    with results.heavy_slot(f"the {name} track") if costly else contextlib.nullcontext():
        return track_inputs(_engine, sequence, name, layer=layer, strategy=strategy, long=long,
                            have=dict.fromkeys(held))
