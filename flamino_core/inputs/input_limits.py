"""What one reading of input may hold: records, residues per record, residues in all, and the
bytes a gzip file may inflate to. One value passed from the caller (a hosted server's policy, a
test) down to the reader, instead of four loose arguments through every function on the way.
"""

from __future__ import annotations

import dataclasses

MAX_GUNZIP_BYTES = 256 * 1024 * 1024  # guards against gzip bombs where no caller sets a bound


@dataclasses.dataclass(frozen=True)
class InputLimits:
    """Bounds on one input (None: unbounded, as on the command line).

    ``max_records``: records past this many are counted, not read (one error says so);
    ``max_residues_per_record``: longer sequences are refused; ``max_total_residues``: records
    are kept in order until their residues exceed this, the valid ones after are dropped (one
    error says so); ``max_decompressed_bytes``: gzip data inflating past this is refused.
    """

    max_records: int | None = None
    max_residues_per_record: int | None = None
    max_total_residues: int | None = None
    max_decompressed_bytes: int = MAX_GUNZIP_BYTES
    # Residues the inputs read before this one hold (``after``): messages name the limit in force,
    # ``max_total_residues`` + this, not what was left of it (issue #67: "more than 500 residues in
    # total" where the limit was 20,000 and earlier files held 19,500).
    spent_residues: int = 0

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None and value < 0:
                raise ValueError(f"{field.name} must be >= 0, got {value}")

    def after(self, records: int, residues: int) -> InputLimits:
        """The limits left for the next input once ``records`` holding ``residues`` were read
        (several inputs read as one spend one set of limits, in order)."""
        return dataclasses.replace(
            self,
            max_records=None if self.max_records is None else self.max_records - records,
            max_total_residues=None if self.max_total_residues is None else max(self.max_total_residues - residues, 0),
            spent_residues=self.spent_residues + residues,
        )


NO_LIMITS = InputLimits()
