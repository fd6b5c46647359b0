"""A design campaign on disk: a folder of JSON and CSV that round N+1 starts from.

::

    campaign.json          format, version, wild_type, first, record_id, target, seed,
                           settings (the defaults), candidates (a file name or null),
                           rounds: [{round, measured, n_measured, measured_from, proposals, proposal}]
    candidates.csv         optional: the only variants proposals are drawn from (a mutant column)
    round-1/proposals.csv  what was proposed for round 1 (``proposals.COLUMNS``)
    round-1/measured.csv   what was measured in round 1, as uploaded (a mutant column + the target)
    round-2/...

``proposal`` holds how the round's proposals were made (``Proposals.info``: the settings, the
acquisition used, the seed, the number measured before, the kernel, the calibration, notes), so
the same proposals can be computed again from the folder and compared (``flamino campaign
propose --round N``). Round N's proposals read the measurements of rounds 1..N-1 only.
Measurements may come without proposals (a first plate chosen by hand) and proposals without
measurements (the plate being made). Every file is written atomically; nothing is pickled.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from flamino_core.wording import byte_size
from flamino_core.atomic import written_atomically
from flamino_core.design.candidates import Measured, read_given
from flamino_core.design.gaussian_process import DesignError
from flamino_core.design.proposals import Proposals, Settings
from flamino_core.numbering import Numbering
from flamino_core.inputs.tables import NO_LIMITS, TableLimits, check_protein, read_table, size_problem
from flamino_core.predictors.table import LabelError, parse_labelled_table, read_table_text

FORMAT, VERSION = "flamino-campaign", 1
JSON_NAME, CANDIDATES_NAME = "campaign.json", "candidates.csv"
MEASURED_NAME, PROPOSALS_NAME = "measured.csv", "proposals.csv"
# The only names a campaign .zip may hold (the app's download and upload): nothing else is unpacked.
ZIP_NAMES = re.compile(r"(campaign\.json|candidates\.csv|round-[1-9][0-9]{0,3}/(measured|proposals)\.csv)")
MAX_ZIP_BYTES = 64 << 20


@dataclasses.dataclass
class Campaign:
    """A campaign folder as read (``load``); ``data`` is ``campaign.json``."""

    folder: Path
    data: dict

    @property
    def wild_type(self) -> str:
        return self.data["wild_type"]

    @property
    def first(self) -> int:
        return int(self.data.get("first", 1))

    @property
    def numbering(self) -> Numbering:
        """The wild type's residue numbering (campaign.json keeps its ``first``)."""
        return Numbering(self.first)

    @property
    def target(self) -> str:
        return self.data["target"]

    @property
    def seed(self) -> int:
        return int(self.data.get("seed", 0))

    @property
    def settings(self) -> Settings:
        return Settings.from_json(self.data.get("settings") or {})

    @property
    def rounds(self) -> list[dict]:
        return self.data["rounds"]

    def round(self, number: int) -> dict | None:
        return next((r for r in self.rounds if r["round"] == number), None)

    @property
    def next_round(self) -> int:
        """The round after the last one with measurements (the one to propose or measure next)."""
        return max((r["round"] for r in self.rounds if r.get("measured")), default=0) + 1

    def measured(self, before: int | None = None) -> Measured:
        """Every measurement of the rounds before ``before`` (None: all rounds), in round order."""
        variants, sequences, values, rounds = [], [], [], []
        for record in sorted(self.rounds, key=lambda r: r["round"]):
            if not record.get("measured") or (before is not None and record["round"] >= before):
                continue
            table = self._read_measured(self.folder / record["measured"])
            rows = np.flatnonzero(table.labelled)
            variants += [table.variants[r] for r in rows]
            sequences += [table.sequences[r] for r in rows]
            values += [float(table.values[r]) for r in rows]
            rounds += [record["round"]] * len(rows)
        return Measured(variants, sequences, np.array(values, np.float64), np.array(rounds, np.int64))

    def _read_measured(self, path: Path, data: bytes | None = None, limits: TableLimits = NO_LIMITS):
        try:
            return parse_labelled_table(path.read_bytes() if data is None else data, self.target,
                                        wild_type=self.wild_type, numbering=self.numbering, task="regression",
                                        limits=limits)
        except LabelError as err:
            raise DesignError(f"{path.name}: {err}") from None

    def given(self) -> list | None:
        """The campaign's candidate table as variants, or None (every allowed single substitution)."""
        name = self.data.get("candidates")
        if not name:
            return None
        frame = read_table_text((self.folder / name).read_bytes())
        variants, _ = read_given(list(frame["mutant"]), self.wild_type, self.numbering)
        return variants

    def add_round(self, data: bytes, source: str = "", limits: TableLimits = NO_LIMITS) -> tuple[int, int, list[str]]:
        """Store a round's measurements as the next round's (``next_round``); ``limits``: a
        server's bounds on a table's bytes, columns and rows (``inputs.tables``), checked first.

        Returns:
          (the round's number, its rows with a value, the problems of the rows left out).

        Raises:
          DesignError: no target column, or no usable row.
        """
        number = self.next_round
        table = self._read_measured(Path(source or MEASURED_NAME), data, limits)
        relative = f"round-{number}/{MEASURED_NAME}"
        path = self.folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        with written_atomically(path) as tmp:
            tmp.write_bytes(data)
        record = self.round(number) or self._new_round(number)
        record.update(measured=relative, n_measured=int(table.labelled.sum()), measured_from=Path(source).name)
        self.save()
        return number, int(table.labelled.sum()), list(table.issues)

    def _new_round(self, number: int) -> dict:
        record = {"round": number, "measured": None, "n_measured": 0, "proposals": None, "proposal": None}
        self.rounds.append(record)
        self.rounds.sort(key=lambda r: r["round"])
        return record

    def save_proposals(self, proposals: Proposals) -> Path:
        number = int(proposals.info["round"])
        relative = f"round-{number}/{PROPOSALS_NAME}"
        path = self.folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        with written_atomically(path) as tmp:
            proposals.table.to_csv(tmp, index=False)
        record = self.round(number) or self._new_round(number)
        record.update(proposals=relative, proposal=_plain(proposals.info))
        self.save()
        return path

    def stored_proposals(self, number: int) -> pd.DataFrame | None:
        record = self.round(number)
        if not record or not record.get("proposals"):
            return None
        return read_table((self.folder / record["proposals"]).read_bytes(), what=record["proposals"], error=DesignError)

    def save(self) -> None:
        with written_atomically(self.folder / JSON_NAME) as tmp:
            tmp.write_text(json.dumps(self.data, indent=2) + "\n")


def init(folder: str | Path, wild_type: str, target: str, *, numbering: Numbering = Numbering(), record_id: str = "",
         seed: int = 0, settings: Settings = Settings(), candidates: bytes | None = None) -> Campaign:
    """A new campaign folder (refused when it already holds one).

    Raises:
      DesignError: the folder holds a campaign, a setting cannot be used, the candidate table
        has no mutant column or none of its rows is a variant of the wild type.
    """
    folder = Path(folder)
    if (folder / JSON_NAME).exists():
        raise DesignError(f"{folder} already holds a campaign ({JSON_NAME}); choose another folder")
    settings.check()
    settings.constraints(wild_type, numbering)
    folder.mkdir(parents=True, exist_ok=True)
    data = {"format": FORMAT, "version": VERSION, "wild_type": wild_type, "first": numbering.first,
            "record_id": record_id, "target": target, "seed": seed, "settings": settings.to_json(),
            "candidates": None, "rounds": []}
    if candidates is not None:
        frame = read_table_text(candidates)
        if "mutant" not in frame.columns:
            raise DesignError("the candidate table needs a mutant column (A23V, A23V:G45D)")
        variants, problems = read_given(list(frame["mutant"]), wild_type, numbering)
        if not variants:
            raise DesignError(f"no candidate is a variant of the wild type; first problem: {problems[:1]}")
        with written_atomically(folder / CANDIDATES_NAME) as tmp:
            tmp.write_bytes(candidates)
        data["candidates"] = CANDIDATES_NAME
    campaign = Campaign(folder, data)
    campaign.save()
    return campaign


def load(folder: str | Path) -> Campaign:
    """A campaign folder.

    Raises:
      DesignError: no campaign there, another format or version.
    """
    folder = Path(folder)
    try:
        data = json.loads((folder / JSON_NAME).read_text())
    except FileNotFoundError:
        raise DesignError(f"{folder}: no campaign here (flamino campaign init makes one)") from None
    except (OSError, ValueError) as err:
        raise DesignError(f"{folder / JSON_NAME}: cannot read it ({err})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise DesignError(f"{folder / JSON_NAME} is not a flamino campaign")
    if data.get("version") != VERSION:
        raise DesignError(f"campaign format version {data.get('version')!r}; this flamino reads version {VERSION}")
    return Campaign(folder, data)


def to_zip(campaign: Campaign) -> bytes:
    """The campaign folder as one ``.zip`` (the app's download; ``from_zip`` reads it back)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(campaign.folder.rglob("*")):
            name = path.relative_to(campaign.folder).as_posix()
            if path.is_file() and ZIP_NAMES.fullmatch(name):
                archive.write(path, name)
    return out.getvalue()


def from_zip(data: bytes, folder: str | Path, limits: TableLimits = NO_LIMITS) -> Campaign:
    """A campaign unpacked from its ``.zip`` into ``folder`` (which must not hold one).

    ``limits``: a server's bounds on an uploaded table (``inputs.tables``), which each table of
    the archive is held to before anything is unpacked (every round read later is a visitor's
    table too), and the wild type's residues.

    Raises:
      DesignError: not a zip, over ``MAX_ZIP_BYTES`` unpacked, a name a campaign does not hold,
        a table over ``limits`` (nothing is unpacked then), or a ``campaign.json`` that ``load``
        refuses, or a wild type over ``limits``.
    """
    folder = Path(folder)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = [info for info in archive.infolist() if not info.is_dir()]
            strange = [info.filename for info in infos if not ZIP_NAMES.fullmatch(info.filename)]
            if strange:
                raise DesignError(f"the archive holds {strange[0]!r}, which a campaign does not")
            if sum(info.file_size for info in infos) > MAX_ZIP_BYTES:
                raise DesignError(f"the archive unpacks to more than {byte_size(MAX_ZIP_BYTES)}")
            if (folder / JSON_NAME).exists():
                raise DesignError(f"{folder} already holds a campaign")
            contents = {info.filename: archive.read(info) for info in infos}
    except zipfile.BadZipFile as err:
        raise DesignError(f"not a campaign archive: {err}") from None
    problem = next(filter(None, (size_problem(content, limits, name) for name, content in contents.items()
                                 if name.endswith(".csv"))), None)
    if problem:
        raise DesignError(problem)
    for name, content in contents.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    campaign = load(folder)
    check_protein(len(campaign.wild_type), "the campaign's wild type", limits, does="runs campaigns on",
                  error=DesignError)
    return campaign


def history(campaign: Campaign) -> pd.DataFrame:
    """One row per round: proposed, measured, the best value and variant so far, and the
    proposals' acquisition and interval calibration (what ``flamino campaign status`` prints and
    the page draws)."""
    rows, best, best_mutant = [], -np.inf, ""
    for record in campaign.rounds:
        number = record["round"]
        measured = campaign.measured(before=number + 1)
        this = measured.rounds == number
        if this.any():
            j = int(np.flatnonzero(this)[np.argmax(measured.values[this])])
            if measured.values[j] > best:
                best, best_mutant = float(measured.values[j]), measured.variants[j].mutant
        proposal = record.get("proposal") or {}
        calibration = proposal.get("calibration") or {}
        rows.append({"round": number, "proposed": _count(campaign, number), "measured": int(this.sum()),
                     "best_this_round": float(measured.values[this].max()) if this.any() else np.nan,
                     "best_so_far": best if np.isfinite(best) else np.nan, "best_variant": best_mutant,
                     "acquisition": proposal.get("acquisition", ""),
                     "coverage_80": calibration.get("coverage")})
    return pd.DataFrame(rows, columns=["round", "proposed", "measured", "best_this_round", "best_so_far",
                                       "best_variant", "acquisition", "coverage_80"])


def _count(campaign: Campaign, number: int) -> int:
    table = campaign.stored_proposals(number)
    return 0 if table is None else len(table)


def _plain(value):
    """JSON-ready: NumPy numbers as Python's, NaN as null."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, (np.floating, float)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value
