"""What this server allows: input limits, and which models may be offered, loaded or asked for.

App policy, not core: the CLI and ``flamino batch`` run on the user's own machine with the
user's own files and never consult it; only the app serves visitors, some of them strangers
with a link. So it lives in the app layer, beside the code that applies it (``inputs.py``,
``models.py``, ``session.py``). Every rule about models is here, in ``Limits.check_model`` (what
this server loads at all) and ``model_from_link`` (what a link may switch a session to).

Set ``FLAMINO_HOSTED=1`` on a public server. Limits can be tuned with environment variables
(``FLAMINO_MAX_UPLOAD_BYTES``, ``FLAMINO_MAX_RECORDS``, ``FLAMINO_MAX_RESIDUES``,
``FLAMINO_MAX_TOTAL_RESIDUES``, ``FLAMINO_MAX_PLL_PASSES``, ``FLAMINO_MAX_INFLATED_BYTES``,
``FLAMINO_MAX_ATOMS``, ``FLAMINO_MAX_MODELS``, ``FLAMINO_MAX_CHAINS``, ``FLAMINO_MAX_UPLOAD_ATOMS``,
``FLAMINO_MAX_TABLE_COLUMNS``,
``FLAMINO_MAX_TABLE_ROWS``, ``FLAMINO_MAX_MUTATIONS``, ``FLAMINO_MAX_FIT_ROWS``, ``FLAMINO_MAX_FIT_CELLS``,
``FLAMINO_MAX_FIT_SECONDS``, ``FLAMINO_MAX_FOLD_SECONDS``), and the models a visitor may choose
with ``FLAMINO_HOSTED_MODELS`` (comma-separated presets; the operator's ``FLAMINO_MODEL`` and the
untrained ``random:tiny`` are always offered). The heavy-job queue is in ``heavy_jobs.py``.

Visitors never see a server path: the operator's own checkpoint is named by its public name
(``FLAMINO_MODEL_NAME``, default ``server-model``) in the picker, in links and in messages;
models that cannot load now (an offline server without the weights) are not offered, and what
the operator should do about them goes to the log (``offered_now``).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time

from flamino_core import settings
from flamino_core.model import RANDOM_TEST_MODEL, ModelId, short_name
from flamino_core.inputs import MAX_GUNZIP_BYTES, InputLimits
from flamino_core.options import PLL_HOSTED_MAX_PASSES
from flamino_core.wording import byte_size

LOG = logging.getLogger("flamino")

# Models a hosted server offers by default besides FLAMINO_MODEL: small enough for a modest
# machine (the 650M model needs ~3 GB per copy, the 3B and 15B ones far more).
DEFAULT_HOSTED_MODELS = ("esm2_t6_8M_UR50D", "esm2_t12_35M_UR50D", "esm2_t30_150M_UR50D")


hosted_mode = settings.hosted  # the app's word for it


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one request may ask for. ``None`` fields mean unlimited (a local, single-user run)."""

    max_upload_bytes: int | None = None
    max_records: int | None = None
    max_residues_per_record: int | None = None
    max_total_residues: int | None = None
    allow_local_paths: bool = True
    allow_pickle: bool = True
    allowed_models: frozenset[str] | None = None  # None: any identifier
    max_pll_passes: int | None = None  # model passes one variant-scoring request may run (any strategy)
    max_inflated_bytes: int | None = None  # a compressed upload's size once decompressed
    max_atoms: int | None = None  # atoms of one structure (Biopython keeps ~1.1 kB each)
    max_models: int | None = None  # models of one structure
    max_chains: int | None = None  # chains of one model of a structure
    max_upload_atoms: int | None = None  # atoms of every structure of one upload and of a session's kept files
    max_table_columns: int | None = None  # columns of an uploaded table (metadata, DMS, labelled)
    max_table_rows: int | None = None  # rows of an uploaded DMS, labelled or metadata table
    max_mutations: int | None = None  # entries of one mutation list
    max_fit_rows: int | None = None  # labelled rows one fit of the Predict page learns from
    max_fit_cells: int | None = None  # rows x features of its widest feature set
    max_fit_seconds: int | None = None  # its scikit-learn fits, estimated at this machine's rate
    max_fold_seconds: int | None = None  # one fold (Structure page), estimated; killed at twice it

    def input_limits(self) -> InputLimits:
        """This server's bounds on one input, for ``fasta.parse_sources`` and the other readers
        (the core's gzip bound locally)."""
        return InputLimits(self.max_records, self.max_residues_per_record, self.max_total_residues,
                           self.max_inflated_bytes or MAX_GUNZIP_BYTES)

    def structure_limits(self) -> dict[str, int | None]:
        """Keyword arguments for ``structure.files.reading.parse_structure_bytes`` / ``read_structure``."""
        from flamino_core.structure import MAX_STRUCTURE_BYTES  # Biopython: not at import

        return {"max_bytes": self.max_inflated_bytes or MAX_STRUCTURE_BYTES, "max_atoms": self.max_atoms,
                "max_models": self.max_models, "max_chains": self.max_chains}

    def check_upload(self, size: int, name: str = "upload") -> str | None:
        """A message if an upload is too large, else None."""
        if self.max_upload_bytes is not None and size > self.max_upload_bytes:
            return (f"{name} is {byte_size(size)}; this server accepts up to {byte_size(self.max_upload_bytes)} "
                    "per file or pasted input. Split it, or run flamino locally for big jobs.")
        return None

    def table_limits(self):
        """``csv_tables.TableLimits`` of a DMS or labelled table: this server's upload size, table
        columns and rows, and its residues per record for the wild type."""
        from flamino_core.inputs import TableLimits

        return TableLimits(max_bytes=self.max_upload_bytes, max_columns=self.max_table_columns,
                           max_rows=self.max_table_rows, max_residues=self.max_residues_per_record)

    def fit_limits(self):
        """``predictors.cost.FitLimits`` of one fit on the Predict page."""
        from flamino_core.predictors import FitLimits

        return FitLimits(max_rows=self.max_fit_rows, max_cells=self.max_fit_cells, max_seconds=self.max_fit_seconds)

    def check_table(self, data: bytes, name: str) -> str | None:
        """Why an uploaded metadata table is refused here (its size, rows, the columns of every
        row: ``inputs.tables.size_problem``, the DMS and labelled tables' check), or None;
        checked before pandas reads it."""
        from flamino_core.inputs import size_problem

        return self.check_upload(len(data), name) or size_problem(data, self.table_limits(), name)

    def check_passes(self, sequence: str, variants: list, strategy: str) -> str | None:
        """Why scoring ``variants`` with ``strategy`` is refused here (more model passes than
        ``max_pll_passes``, the heaviest job this server takes: any strategy, not only pll), or None."""
        if self.max_pll_passes is None:
            return None
        from flamino_core.variants import passes_problem  # pandas: not at import

        return passes_problem(sequence, variants, strategy, self.max_pll_passes)

    def check_model(self, model: ModelId) -> str | None:
        """A message if this server does not offer ``model``, else None."""
        if self.allowed_models is None:
            return None
        if model.key in self.allowed_models:
            return None
        offered = ", ".join(sorted(public_model_name(m, self) for m in self.allowed_models))
        name = shown_model_name(model, self)
        which = f"the model {name}" if name else "that model"
        return (f"this server does not offer {which}; choose one of {offered}, "
                "or run flamino on your own machine for other models and local checkpoints")


def hosted_models() -> frozenset[str]:
    """The identifiers a hosted server offers (FLAMINO_HOSTED_MODELS, FLAMINO_MODEL, random:tiny),
    by their ``ModelId.key``: a door, where the server's environment is read into values."""
    from flamino_core.weights import default_model  # imports Flax (via convert): not at import

    listed = settings.HOSTED_MODELS.get()
    names = list(listed) if listed is not None else list(DEFAULT_HOSTED_MODELS)
    names += [default_model(), RANDOM_TEST_MODEL]
    return frozenset(ModelId.parse(n).key for n in names if n.strip())


def current_limits() -> Limits:
    """The limits in force: strict in hosted mode, none locally."""
    if not hosted_mode():
        return Limits()
    upload = settings.MAX_UPLOAD_BYTES.get()
    return Limits(
        max_upload_bytes=upload,
        max_records=settings.MAX_RECORDS.get(),
        max_residues_per_record=settings.MAX_RESIDUES.get(),
        max_total_residues=settings.MAX_TOTAL_RESIDUES.get(),
        allow_local_paths=False,  # query strings and forms must not name server paths
        allow_pickle=False,  # pickles execute code: never on a public server
        allowed_models=hosted_models(),
        max_pll_passes=settings.MAX_PLL_PASSES.get() or PLL_HOSTED_MAX_PASSES,
        # 5x an upload: a gzipped upload may inflate to five times its limit. Measured on the
        # worst shape of FASTA (two letters a line, one headerless record), parsing costs ~72 bytes
        # of memory per inflated byte: 5 MB peaks at ~360 MB, 20 MB at 1.45 GB (docs/reliability.md).
        # Legitimate hosted input stays far below: 20,000 residues are ~25 kB of FASTA, and a
        # gzipped structure inflates 4-7x.
        max_inflated_bytes=settings.MAX_INFLATED_BYTES.get() or 5 * upload,
        max_atoms=settings.MAX_ATOMS.get(),
        max_models=settings.MAX_MODELS.get(),
        # Each chain becomes a record, a listing line and an alignment: 15,000 one-atom chains (within
        # the atom cap) were 12 s of page work.
        # 999 chains of 60 atoms on the Structure page were 18.1 s and +170 MiB kept (issue #67): 200
        # holds large assemblies (a 70S ribosome ~58 chains, an icosahedral capsid's asymmetric unit fewer).
        max_chains=settings.MAX_CHAINS.get(),
        # Each file of one upload was parsed up to the atom cap: 16 different 78,000-atom files in one
        # drop were 83.8 s of one session's work (issue #67). Charged on the text, before parsing.
        max_upload_atoms=settings.MAX_UPLOAD_ATOMS.get(),
        # Each column of a metadata table becomes a colour choice and a value per record.
        max_table_columns=settings.MAX_TABLE_COLUMNS.get(),
        # Each row of a mutant table becomes its whole sequence (and a fit's row of features):
        # 20,000 rows of a 2,000-residue wild type are 40 MB of sequences. ProteinGym's assays have
        # a median of ~2,000 rows; the shared one has 922.
        max_table_rows=settings.MAX_TABLE_ROWS.get(),
        # A fit's memory is its widest feature matrix (augmented features are dense: 6,000,000
        # values are 48 MB, and ridge centres a copy) and the n x n Gram matrix with its
        # eigenvectors (3,000 rows: 2 x 72 MB); its time is estimated by predictors/cost.py at this
        # machine's measured rate, and a running fit stops at twice the limit. The shared assay
        # (922 rows of a 161-residue protein: 2,968,420 one-hot values) fits well within them.
        # A list entry is a row of the scores the session keeps (~1.3 kB with its variant): the
        # review's 200,000-entry list kept +250 MiB per session and took 90-200 s to score; 20,000,
        # as a DMS table's rows, keep ~25 MiB. Its passes are capped apart (max_pll_passes).
        max_mutations=settings.MAX_MUTATIONS.get(),
        max_fit_rows=settings.MAX_FIT_ROWS.get(),
        max_fit_cells=settings.MAX_FIT_CELLS.get(),
        max_fit_seconds=settings.MAX_FIT_SECONDS.get(),
        # A fold holds the heavy-job slot for its whole length (one compiled call): a 400-residue
        # fold of the hosted model takes ~35-160 s on the 2-core server (issue #67).
        max_fold_seconds=settings.MAX_FOLD_SECONDS.get(),
    )


# --- names visitors see ----------------------------------------------------------------------
SERVER_MODEL_NAME = settings.MODEL_NAME.default


def operator_model() -> str | None:
    """The operator's own checkpoint (``FLAMINO_MODEL`` when it is not a preset or test model): a
    door, where the environment's text is read."""
    model = settings.MODEL.get()
    if not model or ModelId.parse(model).kind in ("random", "preset"):
        return None
    return model


def public_model_name(identifier: str, limits: Limits) -> str:
    """How links and messages name a model: hosted, the operator's checkpoint by its public name
    (``FLAMINO_MODEL_NAME``, default ``server-model``), never by its path; otherwise as it is."""
    if limits.allowed_models is not None and identifier == operator_model():
        return settings.MODEL_NAME.get()
    return identifier


# An absolute path (two or more parts: not "/start-end") in a message. The parts' class excludes "/", so each
# "/" has one reading: the match is linear.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~])(?:/[\w.+@-]+){2,}/?")


def without_paths(text: str) -> str:
    """``text`` with every absolute path cut to its last part (``…/model.safetensors``) on a
    hosted server, where visitors must not learn the server's layout (the cache root, the kernel's
    file, the operator's checkpoint); unchanged locally, where the user owns the files."""
    if current_limits().allowed_models is None:
        return text
    return _ABSOLUTE_PATH.sub(lambda match: "…/" + match.group(0).rstrip("/").rsplit("/", 1)[-1], text)


def visitor_model_name(identifier: str) -> str:
    """``public_model_name`` under the limits in force: what figure titles, tables and downloads
    call a model (hosted: never the operator's checkpoint path)."""
    return public_model_name(identifier, current_limits())


def visitor_short_name(identifier: str) -> str:
    """``visitor_model_name`` as a file-name-like name (``model_id.short_name``, read from the
    text alone): a preset's name, a checkpoint's file or folder name, hosted the operator's
    checkpoint by its public name."""
    return short_name(visitor_model_name(identifier))


def from_public_name(name: str, limits: Limits) -> str:
    """The identifier a public model name (from a link) stands for on this server."""
    operator = operator_model()
    if limits.allowed_models is not None and operator and name == public_model_name(operator, limits):
        return operator
    return name


def shown_model_name(model: ModelId, limits: Limits) -> str | None:
    """The name a message to a visitor may give a model: presets and test models as they are,
    the server's checkpoint by its public name, anything else (hosted: a path from a link) None."""
    name = model.text
    if model.kind in ("random", "preset") or limits.allowed_models is None:
        return name
    if name == operator_model():
        return public_model_name(name, limits)
    return None


# --- models that can load now ----------------------------------------------------------------------
HUB_CHECK_SECONDS = 300.0  # how long one answer on whether the Hub is reachable is trusted
_hub_answer: tuple[float, bool] | None = None
_reported: set[str] = set()  # models already logged as hidden
_offered_lock = threading.Lock()


def _hub_reachable_now() -> bool:
    global _hub_answer
    from flamino_core.weights import hub_reachable

    now = time.monotonic()
    if _hub_answer is None or now - _hub_answer[0] > HUB_CHECK_SECONDS:
        _hub_answer = (now, hub_reachable())
    return _hub_answer[1]


def offered_now(models: list[ModelId]) -> list[ModelId]:
    """Those of ``models`` whose weights this server can load now (hosted mode's picker).

    An offline server without a model's weights would only tell the visitor to run ``flamino
    fetch`` and copy a cache folder; it hides the model instead and says so once in the log,
    with the instructions, for the operator.
    """
    from flamino_core.weights import available_now, offline_message

    with _offered_lock:
        reachable: bool | None = None
        offered = []
        for model_id in models:
            identifier, preset = model_id.text, model_id.preset
            if preset is not None and reachable is None:
                reachable = _hub_reachable_now()
            if available_now(model_id, reachable=reachable):
                offered.append(model_id)
            elif identifier not in _reported:
                _reported.add(identifier)
                why = offline_message(preset) if preset is not None else "its path does not exist"
                LOG.warning("hosted mode: model %s is not offered to visitors: it cannot be loaded now. %s",
                            identifier, why)
        return offered


def weights_permissions(model: ModelId, limits: Limits) -> dict[str, bool]:
    """Keyword arguments for ``load_weights``: in hosted mode no server paths (except the
    operator's own ``FLAMINO_MODEL``) and never a pickle."""
    return {
        "allow_local_paths": limits.allow_local_paths or model.text == settings.MODEL.get(),
        "allow_pickle": limits.allow_pickle,
    }


@dataclasses.dataclass(frozen=True)
class LinkModel:
    """What the app does with the model a link names; exactly one field is set."""

    use: str | None = None  # switch the session to this model
    local_path: str | None = None  # a path on this server: pre-filled, loaded only when asked
    refused: str | None = None  # why not (naming the model); the session keeps its model


def model_from_link(identifier: str, limits: Limits) -> LinkModel:
    """Which model a shared link may switch a session to.

    Hosted: only what this server offers. Locally: the presets, the untrained ``random:tiny``
    and the operator's ``FLAMINO_MODEL`` are loaded; untrained copies of other sizes are
    refused (they take many GB to build, and a link is not enough to ask for that); anything
    else is taken for a path on this machine and pre-filled, so a link from someone else never
    makes the server open files by itself.

    A door: the link's text is read into a ``ModelId`` here, once for what it names.

    Args:
      identifier: the ``model`` value of a decoded link.
      limits: the limits in force (``current_limits()``).
    """
    from flamino_core.weights import default_model  # imports Flax (via convert): not at import

    model_id = ModelId.parse(identifier)
    if limits.allowed_models is not None:
        wanted = from_public_name(identifier, limits)  # the operator's checkpoint, named by its public name
        wanted_id = model_id if wanted == identifier else ModelId.parse(wanted)
        if limits.check_model(wanted_id) or not offered_now([wanted_id]):
            name = shown_model_name(model_id, limits)
            return LinkModel(refused=f"The link was made with the model {name}, which this server does not offer"
                             if name else "The link was made with a model this server does not offer")
        return LinkModel(use=wanted)
    if identifier in (RANDOM_TEST_MODEL, default_model()) or model_id.is_preset:
        return LinkModel(use=identifier)
    if model_id.is_random:
        return _random_from_link(identifier, model_id)
    return LinkModel(local_path=identifier)


def _random_from_link(identifier: str, model_id: ModelId) -> LinkModel:
    """A link's untrained model: every two-layer test model (one per family, with any seed) is
    opened on, as ``random:tiny`` is (#66 D5: they are as small); an untrained copy of a
    published size is refused, saying its size; a spec that names no model, so."""
    from flamino_core.model import PRESETS
    from flamino_core.weights import is_tiny_test_model, tiny_test_models

    if is_tiny_test_model(model_id):
        return LinkModel(use=identifier)
    name = model_id.random_spec.partition(":")[0]
    if name in PRESETS:
        return LinkModel(refused=f"The link asks for {identifier}, an untrained copy of {name} "
                                 f"({PRESETS[name].size} parameters): building one takes as much memory as the "
                                 "published model, so a link does not start it (choose it in the sidebar)")
    tiny = ", ".join(tiny_test_models())
    return LinkModel(refused=f"The link asks for {identifier}, which is no test model this app builds ({tiny})")
