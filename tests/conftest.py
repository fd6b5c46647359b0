"""Shared fixtures: isolated caches, checkpoints written in the published formats, real FASTA."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from flamino_core.config import ESM2Config

SHARED_FASTA = Path(__file__).resolve().parents[2] / "shared" / "fasta"
T6 = ESM2Config.preset("esm2_t6_8M_UR50D")
TINY = ESM2Config.tiny()


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own flamino and HF caches, offline: nothing touches ~/.cache."""
    root = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("FLAMINO_CACHE", str(root / "flamino"))
    monkeypatch.setenv("HF_HOME", str(root / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("FLAMINO_MODEL", raising=False)
    return root


@pytest.fixture(scope="session")
def shared_fasta() -> Path:
    if not SHARED_FASTA.is_dir():
        pytest.skip(f"shared FASTA files not found at {SHARED_FASTA}")
    return SHARED_FASTA


@pytest.fixture(scope="session")
def peer_tests() -> Path:
    """Biopython's ``Tests/`` folder (its PyPI source distribution, see tests/peer_corpus.py)."""
    from peer_corpus import CorpusUnavailable, peer_tests_dir

    try:
        return peer_tests_dir()
    except CorpusUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def real_sequences(shared_fasta) -> dict[str, str]:
    from flamino_core.fasta import read_fasta

    seqs = {}
    for path in sorted(shared_fasta.glob("*.fa")):
        for record in read_fasta(path).records:
            seqs[record.id] = record.sequence
    return seqs


@pytest.fixture(scope="session")
def hf_checkpoints(tmp_path_factory):
    """{(config name, style): (directory, torch reference model)} for both HF key styles."""
    from reference_checkpoints import make_hf_model, write_hf_2022, write_hf_5x

    made = {}

    def get(config: ESM2Config, style: str):
        key = (config.name, style)
        if key not in made:
            model = make_hf_model(config, seed=checkpoint_seed(config.name, style))
            directory = tmp_path_factory.mktemp(f"hf-{config.name}-{style}")
            if style == "2022":
                write_hf_2022(model, config, directory)
            elif style == "2022-bin":
                write_hf_2022(model, config, directory, fmt="bin")
            else:
                write_hf_5x(model, directory)
            made[key] = (directory, _eager(model))
        return made[key]

    return get


def checkpoint_seed(*parts: str) -> int:
    """A weight seed fixed by the checkpoint's name, the same in every process and run.

    (``hash(str)`` is salted per process: it made every run test different weights.)
    """
    return zlib.crc32("/".join(parts).encode()) % 1000


def _eager(model):
    # HF's default SDPA attention returns no attention maps; compare against eager.
    model.config._attn_implementation = "eager"
    for module in model.modules():
        if hasattr(module, "config"):
            module.config._attn_implementation = "eager"
    return model.eval()




def pytest_terminal_summary(terminalreporter):
    """How many times the engine's jitted passes were traced (= compiled) in this run."""
    import sys

    engine = sys.modules.get("flamino_core.engine")
    if engine is not None and engine.TRACE_COUNTS:
        counts = ", ".join(f"{name} {n}" for name, n in sorted(engine.TRACE_COUNTS.items()))
        terminalreporter.write_line(f"flamino compilations in this run: {counts}")
