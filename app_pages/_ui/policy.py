"""What this server allows: input limits, and which models may be offered, loaded or asked for.

App policy, not core: the CLI and ``flamino batch`` run on the user's own machine with the
user's own files and never consult it; only the app serves visitors, some of them strangers
with a link. So it lives in the app layer, beside the code that applies it (``inputs.py``,
``models.py``, ``session.py``). Every rule about models is here, in ``Limits.check_model`` (what
this server loads at all) and ``model_from_link`` (what a link may switch a session to).

Set ``FLAMINO_HOSTED=1`` on a public server. Limits can be tuned with environment variables
(``FLAMINO_MAX_UPLOAD_BYTES``, ``FLAMINO_MAX_RECORDS``, ``FLAMINO_MAX_RESIDUES``,
``FLAMINO_MAX_TOTAL_RESIDUES``, ``FLAMINO_MAX_PLL_PASSES``), and the models a visitor may choose
with ``FLAMINO_HOSTED_MODELS`` (comma-separated presets; the operator's ``FLAMINO_MODEL`` and the
untrained ``random:tiny`` are always offered). The heavy-job queue is in ``heavy_jobs.py``.
"""

from __future__ import annotations

import dataclasses
import os

from flamino_core.config import PRESETS
from flamino_core.options import PLL_HOSTED_MAX_PASSES

# Models a hosted server offers by default besides FLAMINO_MODEL: small enough for a modest
# machine (the 650M model needs ~3 GB per copy, the 3B and 15B ones far more).
DEFAULT_HOSTED_MODELS = ("esm2_t6_8M_UR50D", "esm2_t12_35M_UR50D", "esm2_t30_150M_UR50D")
RANDOM_TEST_MODEL = "random:tiny"


def hosted_mode() -> bool:
    return os.environ.get("FLAMINO_HOSTED", "").strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    try:
        return max(1, int(os.environ.get(name, default)))
    except ValueError:
        return default


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
    max_pll_passes: int | None = None  # masked passes one pll request may run

    def fasta_limits(self) -> dict[str, int | None]:
        """Keyword arguments for ``fasta.parse_fasta_text`` / ``parse_fasta_bytes``."""
        return {
            "max_records": self.max_records,
            "max_residues_per_record": self.max_residues_per_record,
            "max_total_residues": self.max_total_residues,
        }

    def check_upload(self, size: int, name: str = "upload") -> str | None:
        """A message if an upload is too large, else None."""
        if self.max_upload_bytes is not None and size > self.max_upload_bytes:
            return (f"{name} is {_size(size)}; this server accepts up to {_size(self.max_upload_bytes)} "
                    "per file or pasted input. Split it, or run flamino locally for big jobs.")
        return None

    def check_pll(self, length: int, n_variants: int) -> str | None:
        """Why ``pll`` on ``n_variants`` distinct mutants of a ``length``-residue sequence is
        refused here (L passes per sequence, the wild type included), or None."""
        if self.max_pll_passes is None:
            return None
        from flamino_core.variants.scoring import pll_size_problem  # pandas: not at import

        return pll_size_problem(length, n_variants, self.max_pll_passes)

    def check_model(self, identifier: str) -> str | None:
        """A message if this server does not offer the model ``identifier``, else None."""
        if self.allowed_models is None:
            return None
        if identifier.strip().removeprefix("facebook/") in self.allowed_models:
            return None
        offered = ", ".join(sorted(self.allowed_models))
        return (f"this server does not offer the model {identifier!r}; choose one of {offered}, "
                "or run flamino on your own machine for other models and local checkpoints")


def _size(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:.2f} MB"
    return f"{n / 1e3:.1f} kB" if n >= 1_000 else f"{n} bytes"


def hosted_models() -> frozenset[str]:
    """The identifiers a hosted server offers (FLAMINO_HOSTED_MODELS, FLAMINO_MODEL, random:tiny)."""
    from flamino_core.weights import default_model  # imports Flax (via convert): not at import

    listed = os.environ.get("FLAMINO_HOSTED_MODELS")
    names = listed.split(",") if listed is not None else list(DEFAULT_HOSTED_MODELS)
    names += [default_model(), RANDOM_TEST_MODEL]
    return frozenset(n.strip().removeprefix("facebook/") for n in names if n.strip())


def current_limits() -> Limits:
    """The limits in force: strict in hosted mode, none locally."""
    if not hosted_mode():
        return Limits()
    return Limits(
        max_upload_bytes=env_int("FLAMINO_MAX_UPLOAD_BYTES", 1_000_000),
        max_records=env_int("FLAMINO_MAX_RECORDS", 100),
        max_residues_per_record=env_int("FLAMINO_MAX_RESIDUES", 2_000),
        max_total_residues=env_int("FLAMINO_MAX_TOTAL_RESIDUES", 20_000),
        allow_local_paths=False,  # query strings and forms must not name server paths
        allow_pickle=False,  # pickles execute code: never on a public server
        allowed_models=hosted_models(),
        max_pll_passes=env_int("FLAMINO_MAX_PLL_PASSES", PLL_HOSTED_MAX_PASSES),
    )


def weights_permissions(identifier: str, limits: Limits) -> dict[str, bool]:
    """Keyword arguments for ``load_weights``: in hosted mode no server paths (except the
    operator's own ``FLAMINO_MODEL``) and never a pickle."""
    return {
        "allow_local_paths": limits.allow_local_paths or identifier == os.environ.get("FLAMINO_MODEL"),
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

    Args:
      identifier: the ``model`` value of a decoded link.
      limits: the limits in force (``current_limits()``).
    """
    from flamino_core.weights import default_model  # imports Flax (via convert): not at import

    if limits.allowed_models is not None:
        if limits.check_model(identifier):
            return LinkModel(refused=f"The link asks for the model {identifier}, which this server does not offer")
        return LinkModel(use=identifier)
    if identifier in (RANDOM_TEST_MODEL, default_model()) or identifier.removeprefix("facebook/") in PRESETS:
        return LinkModel(use=identifier)
    if identifier.startswith("random:"):
        return LinkModel(refused=f"The link asks for {identifier}, an untrained test model of a large size")
    return LinkModel(local_path=identifier)
