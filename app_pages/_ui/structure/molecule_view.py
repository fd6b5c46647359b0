"""The Structure page's molecular viewer: a Streamlit component drawn with 3Dmol.js.

Why 3Dmol.js and not Mol* (docs/structure.md, "The 3D view"): the viewer must run with no
request leaving the server, colour residues by any track, draw the chosen residue and the top
predicted contacts, and name the residue and its value on hover. 3Dmol.js does all of that
from one 538 kB script with a small, documented API; the Streamlit packaging of Mol*
(``streamlit-molstar``) only loads a file in its default scene. The script is served by the app
from ``molecule_viewer/vendor/`` (npm ``3dmol`` 2.5.5, BSD-3-Clause, checked by ``VENDOR_SHA256``),
through Streamlit's component server: no CDN.

Without the script (a checkout that lost it) the page falls back to the Plotly C-alpha trace.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import streamlit.components.v1 as components

from flamino_core.structure import MolecularScene

FRONTEND = Path(__file__).resolve().parent / "molecule_viewer"
VENDOR_JS = FRONTEND / "vendor" / "3Dmol-min.js"
VENDOR_VERSION = "2.5.5"  # npm 3dmol; `make viewer-js` fetches it again from the registry
VENDOR_SHA256 = "f7cc78921ae72e7623e89cdd111434f58c2efddd2ffda1cd212644b406fb8016"
HEIGHT = 560  # px: the stage; a caption line and the legend sit inside the frame

_component = components.declare_component("flamino_molecule", path=str(FRONTEND)) if VENDOR_JS.exists() else None


def available() -> bool:
    """Whether the viewer's script is here (else the page draws the Plotly trace)."""
    return _component is not None


def vendor_digest() -> str:
    return hashlib.sha256(VENDOR_JS.read_bytes()).hexdigest()


def molecule_view(scene: MolecularScene, key: str, height: int = HEIGHT) -> None:
    """Draw ``scene`` (cartoon coloured by the track, ligands, chosen residue, top contacts)."""
    if _component is None:
        raise RuntimeError("the molecular viewer's script is missing")
    _component(scene=scene.as_args(), height=height, key=key, default=None)
