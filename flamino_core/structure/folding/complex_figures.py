"""A predicted complex (ESMFold2) drawn: the PAE heatmap with its chains' blocks marked, the
chain-pair ipTM table, and the 3D viewer's scene coloured by chain or by AlphaFold's pLDDT bands.
Pure ``(FoldedComplex) -> figure / table / scene`` functions, no Streamlit.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from flamino_core.figures.style import SAFE_CATEGORY_COLOURS, _layout, escape, top_colourbar
from flamino_core.model.esmfold2.folded import FoldedComplex
from flamino_core.structure.complex_files import confidences_json, pdb_problem  # noqa: F401 (the door's)
from flamino_core.structure.complex_files import to_mmcif as complex_mmcif, to_pdb as complex_pdb  # noqa: F401
from flamino_core.structure.confidence import PLDDT_BANDS, band_index
from flamino_core.structure.folding.figures import PAE_COLOURS, PAE_MAX

BOUNDARY = "#000000"


def plddt_band(value: float) -> tuple[str, str]:
    """(band name, colour) of a pLDDT value on the 0-100 scale: ``structure/confidence.py``'s bands,
    the one palette every pLDDT view draws (a band holds its lower bound: 70.0 is confident)."""
    band = PLDDT_BANDS[int(band_index(np.asarray([value]))[0])]
    return band.describe(), band.colour


def chain_colours(n: int) -> list[str]:
    """One colour per chain, the colour-blind-safe categories of every flamino figure, in turn."""
    return [SAFE_CATEGORY_COLOURS[i % len(SAFE_CATEGORY_COLOURS)] for i in range(n)]


def chain_starts(folded: FoldedComplex) -> list[int]:
    """The complex's index of each chain's first residue, and its length at the end."""
    return [0, *np.cumsum([len(s) for s in folded.sequences]).tolist()]


def complex_pae_heatmap(folded: FoldedComplex, title: str) -> go.Figure:
    """The (N, N) predicted aligned error over the whole complex (row: aligned on that residue,
    column: the residue scored, as AlphaFold DB draws it), black lines between the chains' blocks
    and each chain's letter on the axes; hover names the chain and the residue in it."""
    pae = np.asarray(folded.pae, dtype=float)
    labels = [f"{folded.chain_ids[c]} {number}" for c, number, _ in folded.residues()]
    index = np.arange(1, len(labels) + 1)
    fig = go.Figure(go.Heatmap(
        z=pae, x=index, y=index, zmin=0.0, zmax=PAE_MAX, colorscale=PAE_COLOURS,
        customdata=np.array([[(a, b) for b in labels] for a in labels]),
        colorbar=top_colourbar("Expected<br>error (Å)", 1.0),
        hovertemplate="aligned on %{customdata[0]}<br>residue %{customdata[1]}<br>expected error %{z:.1f} Å"
                      "<extra></extra>",
    ))
    starts = chain_starts(folded)
    for edge in starts[1:-1]:  # between chains, on the cells' edges
        for axis in ("x", "y"):
            line = dict(x0=edge + 0.5, x1=edge + 0.5, y0=0.5, y1=starts[-1] + 0.5) if axis == "x" else \
                dict(y0=edge + 0.5, y1=edge + 0.5, x0=0.5, x1=starts[-1] + 0.5)
            fig.add_shape(type="line", line={"color": BOUNDARY, "width": 2}, name="chain boundary", **line)
    middles = [(a + b) / 2 + 0.5 for a, b in zip(starts, starts[1:])]
    ticks = {"tickvals": middles, "ticktext": [f"chain {c}" for c in folded.chain_ids]}
    fig.update_yaxes(autorange="reversed", title="Aligned residue", scaleanchor="x", **ticks)
    fig.update_xaxes(title="Scored residue", **ticks)
    return _layout(fig, escape(title), height=560)


def iptm_table(folded: FoldedComplex) -> pd.DataFrame:
    """The chain-pair ipTM matrix as a table: one row per chain, one column per chain (the diagonal
    is that chain's own pTM-like score, as the reference's ``pair_chains_iptm`` gives it)."""
    names = [f"{c} ({n})" for c, n in zip(folded.chain_ids, folded.chain_names)]
    table = pd.DataFrame(np.round(np.asarray(folded.chain_pair_iptm, dtype=float), 3), columns=names)
    table.insert(0, "chain", names)
    return table


@dataclasses.dataclass(frozen=True)
class ComplexScene:
    """What the molecular viewer (``molecule_viewer/viewer.js``) draws for a complex: every chain
    coloured (``chains``), a legend of named colours (``keys``) instead of a colour bar."""

    model_text: str
    model_format: str
    residues: tuple[dict, ...]
    chains: tuple[str, ...]
    label: str
    keys: tuple[tuple[str, str], ...]  # (colour, what it means)

    def as_args(self) -> dict:
        return {"model": self.model_text, "format": self.model_format, "chain": self.chains[0],
                "chains": list(self.chains), "residues": list(self.residues), "chosen": None, "contacts": [],
                "legend": {"label": self.label, "keys": [list(k) for k in self.keys]}, "bfactor_scale": None}


def complex_scene(folded: FoldedComplex, model_text: str, model_format: str, colour_by: str) -> ComplexScene:
    """The scene of the predicted complex coloured ``by`` "chain" or "pLDDT" (AlphaFold's bands, from
    each residue's pLDDT: the mean over its atoms, 0-100). ``model_text``: the complex as PDB (its
    B-factors the per-atom pLDDT) or mmCIF; residues are keyed ``chain|number|`` as the viewer reads them."""
    if colour_by not in ("chain", "pLDDT"):
        raise ValueError(f"colour the complex by 'chain' or 'pLDDT', not {colour_by!r}")
    by_chain = chain_colours(len(folded.chain_ids))
    residues = []
    for (chain, number, name), plddt in zip(folded.residues(), 100 * np.asarray(folded.plddt, dtype=float)):
        chain_id = folded.chain_ids[chain]
        band, band_colour = plddt_band(plddt)
        residues.append({
            "key": f"{chain_id}|{number}|", "colour": by_chain[chain] if colour_by == "chain" else band_colour,
            "text": f"chain {chain_id} ({folded.chain_names[chain]}) {number} {name} · pLDDT {plddt:.1f} ({band})",
            "position": number, "value": round(float(plddt), 3),
        })
    if colour_by == "chain":
        keys = tuple((by_chain[c], f"chain {cid}: {folded.chain_names[c]}") for c, cid in enumerate(folded.chain_ids))
    else:
        keys = tuple((band.colour, f"pLDDT {band.describe()}") for band in reversed(PLDDT_BANDS))
    return ComplexScene(model_text, model_format, tuple(residues), tuple(folded.chain_ids),
                        "chain" if colour_by == "chain" else "pLDDT (AlphaFold's bands)", keys)
