"""What the molecular viewer draws: the model, each residue's colour and hover text, the chosen
residue and the top predicted contacts. Pure data (no Streamlit, no JavaScript): the app's
viewer component (``app_pages/_ui/structure/molecule_view.py``, 3Dmol.js) draws it, and the Plotly
fallback (``figures.structure_trace_3d``) takes its colours from the same scale.

Residues are keyed as 3Dmol.js reads them from the model text: ``chain|number|insertion code``
(``A|184|A``; mmCIF carries no insertion code there, so ``A|184|``). The model text is PDB with
the track in the B-factor column (``export.pdb_with_track`` on the whole model: other chains,
ligands, nucleic acids and water come along), so the values the viewer holds can be read back
from it; where PDB cannot hold the model (chain ids over one character, values outside the
B-factor column) it is mmCIF without the values.
"""

from __future__ import annotations

import dataclasses
import io

import numpy as np
from Bio.PDB import MMCIFIO
from plotly.colors import sample_colorscale

from flamino_core.inputs.numbering import Numbering
from flamino_core.structure.align import ChainAlignment
from flamino_core.structure.confidence import PLDDT_BANDS, Band, band_index, plddt_colours
from flamino_core.structure.contacts import TopPairs
from flamino_core.structure.export import pdb_export_problem, pdb_with_track
from flamino_core.structure.files.reading import ParsedStructure

SEQUENTIAL, DIVERGING = "Viridis", "RdBu"  # RdBu around 0, as the substitution maps of the other pages
NO_VALUE = "#bbbbbb"  # residues with no value: not aligned, or NaN
TRUE_POSITIVE, FALSE_POSITIVE = "#009E73", "#D55E00"  # Okabe-Ito green / vermillion: never blue on blue
MAX_CONTACTS_DRAWN = 500  # cylinders; the map's cutoff picker decides how many are asked for
# The model text travels to the browser with every rerun of the page: a whole model larger than
# this (~50,000 atoms at 81 characters a line) sends only the aligned chain.
MAX_MODEL_CHARS = 4_000_000


@dataclasses.dataclass(frozen=True)
class ColourScale:
    """How values become colours: a Plotly colour scale over [low, high] (centred on 0 when signed),
    or fixed bands (pLDDT's, ``confidence.PLDDT_BANDS``), never stretched to the data."""

    name: str
    low: float
    high: float
    signed: bool
    bands: tuple[Band, ...] = ()

    def colours(self, values: np.ndarray) -> list[str | None]:
        """Hex colours, None where a value is NaN."""
        values = np.asarray(values, dtype=np.float64)
        if self.bands:
            return plddt_colours(values)
        span = self.high - self.low
        fractions = np.clip((values - self.low) / span, 0, 1) if span > 0 else np.full(values.shape, 0.5)
        finite = np.isfinite(values)
        picked = sample_colorscale(self.name, list(fractions[finite])) if finite.any() else []
        it = iter(_hex(colour) for colour in picked)
        return [next(it) if ok else None for ok in finite]

    def stops(self, n: int = 11) -> list[str]:
        """Colours from low to high, for a legend."""
        if self.bands:
            return [band.colour for band in self.bands]
        return [_hex(c) for c in sample_colorscale(self.name, list(np.linspace(0, 1, n)))]


PLDDT_SCALE = ColourScale("pLDDT confidence bands", 0.0, 100.0, False, PLDDT_BANDS)


def colour_scale(values: np.ndarray, signed: bool) -> ColourScale:
    """Viridis over the values' range, or for a signed quantity (a score, a PCA component) red-blue
    centred on 0 over ±max|value|, as the other pages draw scores."""
    finite = np.asarray(values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if signed:
        bound = float(np.abs(finite).max()) if finite.size else 1.0
        bound = bound or 1.0
        return ColourScale(DIVERGING, -bound, bound, True)
    if not finite.size:
        return ColourScale(SEQUENTIAL, 0.0, 1.0, False)
    return ColourScale(SEQUENTIAL, float(finite.min()), float(finite.max()), False)


def _hex(colour: str) -> str:
    if colour.startswith("#"):
        return colour.lower()
    r, g, b = (int(round(float(v))) for v in colour[colour.index("(") + 1:colour.index(")")].split(",")[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


@dataclasses.dataclass(frozen=True)
class MolecularScene:
    """Everything the viewer needs, JSON-ready through ``as_args``."""

    model_text: str
    model_format: str  # "pdb" or "cif" (3Dmol.js format names)
    chain_id: str
    residues: tuple[dict, ...]  # {key, colour, text, position (1-based or None), value (or None)}
    chosen: dict | None  # {key, text} of the chosen residue, or None
    contacts: tuple[dict, ...]  # {start, end ([x, y, z]), colour, text, contact (bool)}
    scale: ColourScale
    label: str  # what the colours are
    values_in_bfactors: float | None  # the scale the B-factor column holds them at (None: not there)

    def as_args(self) -> dict:
        return {
            "model": self.model_text,
            "format": self.model_format,
            "chain": self.chain_id,
            "residues": list(self.residues),
            "chosen": self.chosen,
            "contacts": list(self.contacts),
            "legend": {"label": self.label, "low": self.scale.low, "high": self.scale.high,
                       "stops": self.scale.stops(), "signed": self.scale.signed,
                       "bands": [{"name": band.describe(), "colour": band.colour} for band in self.scale.bands]},
            "bfactor_scale": self.values_in_bfactors,
        }


def residue_key(chain_id: str, residue_id: tuple[str, int, str], with_icode: bool = True) -> str:
    """How the viewer names a residue: ``A|184|A`` (``A|184|`` without an insertion code)."""
    return f"{chain_id}|{residue_id[1]}|{residue_id[2].strip() if with_icode else ''}"


def molecular_scene(
    parsed: ParsedStructure,
    alignment: ChainAlignment,
    values: np.ndarray,
    label: str,
    *,
    signed: bool = False,
    scale: float = 1.0,
    numbering: Numbering = Numbering(),
    chosen: int | None = None,
    top: TopPairs | None = None,
    confidence: bool = False,
) -> MolecularScene:
    """The viewer's scene for a track on the aligned chain.

    Args:
      parsed, alignment: the structure and its chain aligned to the sequence.
      values: (L,) the track, one value per sequence position (NaN: none).
      label: what the values are (legend and hover).
      signed: a quantity around 0 (scores, PCA): red-blue centred on 0; else Viridis.
      scale: the track's ``pdb_scale`` (attention x100) for the B-factor column.
      numbering: the sequence's residue numbering (positions in hover text).
      chosen: 0-based sequence position of the residue to draw as sticks, or None.
      top: the top predicted pairs (``contacts.top_predictions``), drawn between contact atoms
        (C-beta; C-alpha for glycine), coloured as true or false contacts.
      confidence: the values are pLDDT (0-100): coloured by AlphaFold's fixed bands
        (``confidence.PLDDT_BANDS``), never by a scale stretched to the data.
    """
    chain = alignment.chain
    text, fmt, in_bfactors = _model_text(parsed, alignment, values, label, scale)
    with_icode = fmt == "pdb"
    per_residue = alignment.per_residue(values)
    colour_of = PLDDT_SCALE if confidence else colour_scale(values, signed)
    colours = colour_of.colours(per_residue)
    position_of = np.full(len(chain), -1)
    aligned = np.flatnonzero(alignment.residue_at >= 0)
    position_of[alignment.residue_at[aligned]] = aligned
    residues = []
    for rid, name, p, value, colour in zip(chain.residue_ids, chain.names, position_of, per_residue, colours):
        where = (f"position {numbering.number(p):,} ({alignment.sequence[p]})" if p >= 0
                 else "not aligned to the sequence")
        shown = f"{label} = {value:.3g}" if np.isfinite(value) else "no value"
        if confidence and np.isfinite(value):
            shown += f" ({PLDDT_BANDS[band_index(value)].name})"
        residues.append({
            "key": residue_key(chain.chain_id, rid, with_icode),
            "colour": colour or NO_VALUE,
            "text": f"{chain.chain_id} {rid[1]}{rid[2].strip()} {name} · {where} · {shown}",
            "position": int(numbering.number(p)) if p >= 0 else None,
            "value": float(value) if np.isfinite(value) else None,
        })
    picked = None
    if chosen is not None and 0 <= chosen < len(alignment.residue_at) and alignment.residue_at[chosen] >= 0:
        k = alignment.residue_at[chosen]
        picked = {"key": residues[k]["key"], "text": residues[k]["text"]}
    return MolecularScene(
        model_text=text, model_format=fmt, chain_id=chain.chain_id, residues=tuple(residues),
        chosen=picked, contacts=tuple(_contacts(alignment, top, numbering)), scale=colour_of, label=label,
        values_in_bfactors=scale if in_bfactors else None,
    )


def _contacts(alignment: ChainAlignment, top: TopPairs | None, numbering: Numbering) -> list[dict]:
    if top is None or not len(top):
        return []
    xyz = alignment.chain.contact_xyz
    out = []
    for i, j, probability, is_contact in list(zip(top.i, top.j, top.probability, top.is_contact))[:MAX_CONTACTS_DRAWN]:
        a, b = alignment.residue_at[i], alignment.residue_at[j]
        if a < 0 or b < 0:  # judged pairs have both residues; kept safe for any TopPairs
            continue
        distance = float(np.linalg.norm(xyz[a] - xyz[b]))
        truth = "a contact in the structure" if is_contact else "no contact in the structure"
        out.append({
            "start": [round(float(v), 3) for v in xyz[a]],
            "end": [round(float(v), 3) for v in xyz[b]],
            "colour": TRUE_POSITIVE if is_contact else FALSE_POSITIVE,
            "contact": bool(is_contact),
            "text": f"positions {numbering.number(i):,}–{numbering.number(j):,}: "
                    f"predicted p = {probability:.3f}, {truth} ({distance:.1f} Å)",
        })
    return out


def _model_text(parsed: ParsedStructure, alignment: ChainAlignment, values: np.ndarray, label: str,
                scale: float) -> tuple[str, str, bool]:
    """(text, format, whether the B-factor column holds the track)."""
    for whole in (True, False):
        if pdb_export_problem(parsed, alignment, values, label, scale, whole_model=whole) is None:
            text = pdb_with_track(parsed, alignment, values, label, scale=scale, whole_model=whole)
            if len(text) <= MAX_MODEL_CHARS or not whole:
                return text, "pdb", True
    # Chain ids PDB cannot hold, or values outside its B-factor column: mmCIF, the file's own B-factors.
    out = io.StringIO()
    writer = MMCIFIO()
    writer.set_structure(parsed.model(alignment.chain.model_index))
    writer.save(out)
    return out.getvalue(), "cif", False
