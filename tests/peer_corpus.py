"""The peer corpus: the test files Biopython keeps for its own readers (``Tests/`` of its source
distribution), fetched from PyPI at test time and unpacked once under ``test-artifacts/``.

Nothing of it is committed (tests/data/SOURCES.md says which release it is and which git commit
that release was tagged from). ``make test`` runs this file first (``python tests/peer_corpus.py``)
so the download happens before pytest; the ``peer_tests`` fixture calls ``peer_tests_dir`` too,
so ``pytest`` alone works, and skips with the reason when PyPI cannot be reached.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
from pathlib import Path

BIOPYTHON_VERSION = "1.88"  # tagged biopython-188, commit d7e4b8b19399668b09442a5b35765d9186b5f665
SDIST = f"biopython-{BIOPYTHON_VERSION}.tar.gz"
SDIST_SHA256 = "9aaa31c0bda4d059f7b2ee00bfdb5cbb73ade3057aa4b737a7cc0187091d071a"
FOLDERS = ("EMBL", "GenBank", "SwissProt", "Fasta", "GFF", "PDB")  # the sequence and structure files
ROOT = Path(__file__).resolve().parents[1] / "test-artifacts" / "peer-corpus"


class CorpusUnavailable(RuntimeError):
    """The corpus could not be fetched (no registry here); the message says why."""


def peer_tests_dir(root: Path = ROOT) -> Path:
    """``Tests/`` of Biopython's source distribution, downloaded and unpacked on first use."""
    tests = root / f"biopython-{BIOPYTHON_VERSION}" / "Tests"
    if (tests / ".complete").exists():
        return tests
    root.mkdir(parents=True, exist_ok=True)
    archive = root / SDIST
    if not archive.exists() or _sha256(archive) != SDIST_SHA256:
        download = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
             f"biopython=={BIOPYTHON_VERSION}", "-d", str(root)],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        if download.returncode or not archive.exists():
            raise CorpusUnavailable(f"pip could not download {SDIST}: {download.stderr.strip()[-300:]}")
    if _sha256(archive) != SDIST_SHA256:
        raise CorpusUnavailable(f"{archive} does not have the recorded SHA-256 {SDIST_SHA256}")
    prefix = f"biopython-{BIOPYTHON_VERSION}/Tests/"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers()
                   if m.isfile() and m.name.startswith(prefix) and m.name[len(prefix):].split("/")[0] in FOLDERS]
        tar.extractall(root, members=members, filter="data")
    (tests / ".complete").touch()
    return tests


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


if __name__ == "__main__":  # make test: fetch once, before pytest
    try:
        print(f"peer corpus: {peer_tests_dir()}")
    except CorpusUnavailable as exc:
        print(f"peer corpus not available ({exc}); its tests will be skipped", file=sys.stderr)
