"""Every ``FLAMINO_*`` environment variable flamino reads, declared and read here and nowhere else
(tests/unit/test_settings.py holds it); docs/settings.md is their one table.

A ``Setting`` reads the environment each time it is asked (``get``), never at import: a test's
``monkeypatch.setenv`` and a server's restart see the value in force. Its typed value is the
parsed text, or its ``default`` when the variable is unset or does not parse (a ``strict``
setting raises a ValueError naming the variable instead). Values are stripped of surrounding
spaces first; an empty text counts as unset for every setting but ``HOSTED_MODELS`` (where an
empty list means "no other models"). Setting a variable for a child process (``env=``) is not
reading it: that stays with the code that starts the child.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

_TRUE = frozenset({"1", "true", "yes", "on"})


@dataclasses.dataclass(frozen=True)
class Setting:
    """One environment variable: its name, what its text means, and the value when unset."""

    name: str
    parse: Callable[[str], Any]  # the stripped text to the value; ValueError (or None): not usable
    default: Any = None
    strict: bool = False  # an unusable text raises (naming the variable) instead of giving the default

    def get(self) -> Any:
        text = os.environ.get(self.name)
        return self.default if text is None else self._value(text.strip())

    def take(self) -> Any:
        """The value, removed from this process's environment (so its children do not inherit it)."""
        text = os.environ.pop(self.name, None)
        return self.default if text is None else self._value(text.strip())

    def _value(self, text: str) -> Any:
        try:
            value = self.parse(text)
        except ValueError as err:
            if self.strict:
                raise ValueError(f"{self.name}={text!r}: {err}") from None
            return self.default
        return self.default if value is None else value


def _text(text: str) -> str | None:
    return text or None


def _at_least_one(text: str) -> int:
    return max(1, int(text))


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError("a count is 0 or more")
    return value


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _megabytes(text: str) -> int:
    return int(float(text) * (1 << 20))


# --- where things are kept ----------------------------------------------------------------------
CACHE = Setting("FLAMINO_CACHE", _text)  # converted weights, the result store; None: ~/.cache/flamino
JAX_CACHE = Setting("FLAMINO_JAX_CACHE", _text)  # JAX's compilation cache; None: FLAMINO_CACHE/jax
STORE = Setting("FLAMINO_STORE", lambda t: t.lower() not in {"off", "0", "no", "false"} if t else None, True)
STORE_MAX_BYTES = Setting("FLAMINO_STORE_MAX_MB", _megabytes, strict=True)  # None: the store's 2 GiB

# --- the model and how it runs ------------------------------------------------------------------
MODEL = Setting("FLAMINO_MODEL", _text)  # None: the default preset (weights.loading.DEFAULT_MODEL)
PRECISION = Setting("FLAMINO_PRECISION", _text)  # None: fp32 (engine.hardware checks the name)
ATTENTION = Setting("FLAMINO_ATTENTION", _text, "auto")
PACKING = Setting("FLAMINO_PACKING", _text, "auto")
MATMUL_PRECISION = Setting("FLAMINO_MATMUL_PRECISION", _text)  # None: hardware's exact default
ALLOW_EMULATED_BF16 = Setting("FLAMINO_ALLOW_EMULATED_BF16", lambda t: t == "1", False)  # only "1" opens it
KERNEL_VARIANT = Setting("FLAMINO_KERNEL_VARIANT", _text, "auto")
DEVICE_CAPACITY_BYTES = Setting("FLAMINO_DEVICE_CAPACITY_BYTES", int, strict=True)  # None: what the device says
DEBUG = Setting("FLAMINO_DEBUG", lambda t: bool(t) or None, False)  # any text: the CLI shows tracebacks
LOAD_SHARE = Setting("FLAMINO_LOAD_SHARE", lambda t: "auto" if t == "auto" else float(t))  # None: 1 (off)

# --- set-level jobs on Ray ----------------------------------------------------------------------
RAY_ADDRESS = Setting("FLAMINO_RAY_ADDRESS", _text)
RAY_ACTORS = Setting("FLAMINO_RAY_ACTORS", int, strict=True)  # None: Ray Data's own
RAY_CPUS_PER_ACTOR = Setting("FLAMINO_RAY_CPUS_PER_ACTOR", float, 1.0, strict=True)

# --- folding ------------------------------------------------------------------------------------
MAX_FOLD_RESIDUES = Setting("FLAMINO_MAX_FOLD_RESIDUES", _count)  # None: folding's hosted default
FOLD_MODEL = Setting("FLAMINO_FOLD_MODEL", _text)  # None: the untrained test model
FOLD2_MODEL = Setting("FLAMINO_FOLD2_MODEL", _text)
FOLD_STEM_PRECISION = Setting("FLAMINO_FOLD_STEM_PRECISION", _text, "fp32")
FOLD_WORKER = Setting("FLAMINO_FOLD_WORKER", lambda t: {"1": True, "0": False}.get(t))  # None: hosted decides
FOLD_NICE = Setting("FLAMINO_FOLD_NICE", int)
FOLD_CORES = Setting("FLAMINO_FOLD_CORES", int)
FOLD_WORKER_LENGTHS = Setting("FLAMINO_FOLD_WORKER_LENGTHS", int)
FOLD_WORKER_MIB = Setting("FLAMINO_FOLD_WORKER_MIB", int)
FOLD_EXPRESS_RESIDUES = Setting("FLAMINO_FOLD_EXPRESS_RESIDUES", int)  # None: fold_worker's 128; 0: no lane
FOLD_EXPRESS_WARM = Setting("FLAMINO_FOLD_EXPRESS_WARM", lambda t: t.lower() in _TRUE, True)
FOLD_PLATFORM = Setting("FLAMINO_FOLD_PLATFORM", _text)  # the worker's JAX_PLATFORMS
# Not an operator's setting: how a parent hands its worker process that worker's share ("nice;cpu,cpu").
WORKER_SHARE = Setting("FLAMINO_WORKER_SHARE", str, "")

# --- a hosted server (app_pages/_ui/server/policy.py) ---------------------------------------------
HOSTED = Setting("FLAMINO_HOSTED", lambda t: t.lower() in _TRUE, False)
HOSTED_MODELS = Setting("FLAMINO_HOSTED_MODELS", _names)  # None: policy's defaults; (): none besides MODEL
MODEL_NAME = Setting("FLAMINO_MODEL_NAME", _text, "server-model")
VISITOR_HEADER = Setting("FLAMINO_VISITOR_HEADER", _text)
MAX_UPLOAD_BYTES = Setting("FLAMINO_MAX_UPLOAD_BYTES", _at_least_one, 1_000_000)
MAX_RECORDS = Setting("FLAMINO_MAX_RECORDS", _at_least_one, 100)
MAX_RESIDUES = Setting("FLAMINO_MAX_RESIDUES", _at_least_one, 2_000)
MAX_TOTAL_RESIDUES = Setting("FLAMINO_MAX_TOTAL_RESIDUES", _at_least_one, 20_000)
MAX_PLL_PASSES = Setting("FLAMINO_MAX_PLL_PASSES", _at_least_one)  # None: options.PLL_HOSTED_MAX_PASSES
MAX_INFLATED_BYTES = Setting("FLAMINO_MAX_INFLATED_BYTES", _at_least_one)  # None: 5x the upload limit
MAX_ATOMS = Setting("FLAMINO_MAX_ATOMS", _at_least_one, 100_000)
MAX_MODELS = Setting("FLAMINO_MAX_MODELS", _at_least_one, 100)
MAX_CHAINS = Setting("FLAMINO_MAX_CHAINS", _at_least_one, 200)
MAX_UPLOAD_ATOMS = Setting("FLAMINO_MAX_UPLOAD_ATOMS", _at_least_one, 200_000)
MAX_TABLE_COLUMNS = Setting("FLAMINO_MAX_TABLE_COLUMNS", _at_least_one, 200)
MAX_TABLE_ROWS = Setting("FLAMINO_MAX_TABLE_ROWS", _at_least_one, 20_000)
MAX_MUTATIONS = Setting("FLAMINO_MAX_MUTATIONS", _at_least_one, 20_000)
MAX_FIT_ROWS = Setting("FLAMINO_MAX_FIT_ROWS", _at_least_one, 3_000)
MAX_FIT_CELLS = Setting("FLAMINO_MAX_FIT_CELLS", _at_least_one, 6_000_000)
MAX_FIT_SECONDS = Setting("FLAMINO_MAX_FIT_SECONDS", _at_least_one, 600)
MAX_FOLD_SECONDS = Setting("FLAMINO_MAX_FOLD_SECONDS", _at_least_one, 600)
MAX_UPLOAD_STORE_MB = Setting("FLAMINO_MAX_UPLOAD_STORE_MB", _at_least_one, 256)
STRUCTURE_CACHE_BYTES = Setting("FLAMINO_STRUCTURE_CACHE_BYTES", _at_least_one)  # None: 256 MB hosted, else 2 GB
HEAVY_WORKERS = Setting("FLAMINO_HEAVY_WORKERS", _at_least_one, 1)
HEAVY_WAITING = Setting("FLAMINO_HEAVY_WAITING", _at_least_one, 4)
HEAVY_PER_VISITOR = Setting("FLAMINO_HEAVY_PER_VISITOR", _at_least_one, 2)
FETCH_WORKERS = Setting("FLAMINO_FETCH_WORKERS", _at_least_one, 2)
FETCH_WAITING = Setting("FLAMINO_FETCH_WAITING", _at_least_one, 8)

ALL: tuple[Setting, ...] = tuple(v for v in dict(globals()).values() if isinstance(v, Setting))


def hosted() -> bool:
    """Whether this is a public server (``FLAMINO_HOSTED``): its limits, its models, no local paths."""
    return HOSTED.get()
