"""pLDDT drawn as confidence: AlphaFold's four fixed bands, their names and customary colours.

A predicted structure's pLDDT (0-100) is read by biologists in the bands the AlphaFold DB draws
(Jumper et al. 2021; the AlphaFold DB's and Mol*'s "pLDDT" theme): very low < 50 (orange), low
50-70 (yellow), confident 70-90 (light blue), very high >= 90 (dark blue). A colour scale
stretched to the data (Viridis over 49-57) makes a uniformly unsure fold look partly confident,
so every pLDDT view here (the 3D view, its legend, the per-residue track, the Plotly fallback)
takes its colours from these bands and nothing else.

Boundaries: a band holds its lower bound (70.0 is "confident"), so the bands agree with
SaProt's mask, which hides residues with pLDDT < 70 (``three_di.PLDDT_THRESHOLD``).
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Band:
    """One confidence band: pLDDT in [low, high) (the last includes 100)."""

    name: str
    low: float
    high: float
    colour: str  # hex, lower case

    def describe(self) -> str:
        """``low (50-70)`` as a legend says it."""
        if self.low <= 0:
            return f"{self.name} (< {self.high:g})"
        if self.high >= 100:
            return f"{self.name} (≥ {self.low:g})"
        return f"{self.name} ({self.low:g}-{self.high:g})"


PLDDT_BANDS = (
    Band("very low", 0.0, 50.0, "#ff7d45"),
    Band("low", 50.0, 70.0, "#ffdb13"),
    Band("confident", 70.0, 90.0, "#65cbf3"),
    Band("very high", 90.0, 100.0, "#0053d6"),
)


def band_index(plddt: np.ndarray) -> np.ndarray:
    """Each value's band (0 very low .. 3 very high); -1 where NaN. Values below 0 or above 100
    (never from a model) fall in the end bands."""
    plddt = np.asarray(plddt, dtype=np.float64)
    index = np.searchsorted([band.low for band in PLDDT_BANDS[1:]], plddt, side="right")
    return np.where(np.isfinite(plddt), index, -1)


def plddt_colours(plddt: np.ndarray) -> list[str | None]:
    """The band colour of each value, None where NaN."""
    return [PLDDT_BANDS[k].colour if k >= 0 else None for k in band_index(plddt)]


def band_counts(plddt: np.ndarray) -> dict[str, int]:
    """How many values fall in each band, by name (in band order)."""
    index = band_index(plddt)
    return {band.name: int((index == k).sum()) for k, band in enumerate(PLDDT_BANDS)}


def plotly_colourscale() -> list[list]:
    """A stepped Plotly colour scale over cmin=0, cmax=100 that draws the bands exactly (each band's
    colour held from its lower bound to its upper one)."""
    scale = []
    for band in PLDDT_BANDS:
        scale.append([band.low / 100, band.colour])
        scale.append([band.high / 100, band.colour])
    return scale
