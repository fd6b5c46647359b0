"""Mutation lists: ProteinGym and HGVS protein notation, checked against the sequence.

Accepted notation, one variant per line or separated by spaces, commas or semicolons:

* ProteinGym / one-letter: ``A23V``; a multi-mutant joins substitutions with ``:`` (``A23V:G45D``).
* HGVS protein: ``p.Ala23Val``, predicted ``p.(Ala23Val)``, several on one allele
  ``p.[Ala23Val;Gly45Asp]``; one-letter HGVS (``p.A23V``) and three-letter without ``p.`` too.
* A CSV (comma or tab separated) with a ``mutant`` column, and optionally a ``label`` column
  (``benign``, ``pathogenic`` ...) that the app draws as markers.
* As pasted from clinical sources (``pasted``): a reference or gene prefix (``NP_005334.1:p.Gly12Val``,
  ``HRAS:p.G12V``, checked against the record's id), ClinVar's names (``NM_005343.4(HRAS):c.35G>T
  (p.Gly12Val)``: its protein part); legacy stops (``W1282X``) and deletions (``ΔF508``) are
  named as what they are.

Positions are numbered in a ``Numbering``, from the number of the sequence's first residue (1 unless
the sequence is a piece of a longer entry; see ``numbering.first_number``). Every variant is checked
against the sequence; one that cannot be scored
becomes a ``VariantIssue`` with a message naming it, and the others are still returned. No str or
bytes input makes ``parse_mutations`` raise.

Every step is linear in the input's length (a list can come from a stranger on a hosted server):
an entry longer than ``MAX_ENTRY_CHARS`` is refused before any regex sees it, no regex here has
nested or overlapping quantifiers, and ``parse_mutations`` refuses a list over ``max_chars``
before reading it (``tests/integration/test_hosted_attacks.py`` times every parser on 1 MB of hostile text).
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from typing import Callable

import numpy as np

from flamino_core.alphabet import STANDARD_AMINO_ACIDS
from flamino_core.inputs.numbering import Numbering
from flamino_core.inputs.three_letter import CODES
# Re-exported: callers import them here.
from flamino_core.variants.variant import Edit, Substitution, Variant, VariantIssue  # noqa: F401
from flamino_core.variants.pasted import is_table, list_entries, protein_part, table_entries

# Kinds of VariantIssue, so callers can filter or count them without parsing messages.
MALFORMED, INDEL, STOP, SYNONYMOUS, NON_STANDARD = "malformed", "indel", "stop", "synonymous", "non-standard"
OUT_OF_RANGE, WRONG_WILD_TYPE, REPEATED, INPUT = "out-of-range", "wrong-wild-type", "repeated-position", "input"
NUCLEOTIDE, WRONG_REFERENCE = "nucleotide", "wrong-reference"  # as ``pasted.protein_part`` names them
EXPECTED = "expected e.g. A23V, A23V:G45D, p.Ala23Val, p.(Ala23Val) or p.[Ala23Val;Gly45Asp]"
_SHOWN = 60  # characters of a bad entry quoted in a message
# Said after the refusal of an indel or a stop by a substitution strategy.
_BY_SEQUENCE = "this way (flamino variants --strategy pll or wt-pll-approx scores it)"

# One substitution: a one- or three-letter wild type, a position, a one- or three-letter target
# (or ``*``/``Ter`` for a stop, ``=`` for HGVS's "unchanged", ``?`` for "unknown").
_CHANGE = re.compile(r"([A-Za-z*]|[A-Za-z]{3})(\d+)([A-Za-z*=?]|[A-Za-z]{3})")
# The common case, ProteinGym's ``A23V``, read without the general path (a DMS table or a long
# list is mostly this; the general path costs several times more per entry).
_PLAIN_CHANGE = re.compile(r"([ACDEFGHIKLMNPQRSTVWY])(\d{1,9})([ACDEFGHIKLMNPQRSTVWY])")
# Insertions, deletions, duplications, frameshifts, extensions: a word naming one of them after
# the first digit, or a range (``Lys23_Val25del``). Two separate linear searches: the single
# pattern ``\d.*(del|...)`` they replace backtracked quadratically on a long run of digits
# (40,000 digits took 81 s, holding the interpreter lock).
_INDEL_WORD = re.compile(r"del|ins|dup|fs|ext", re.IGNORECASE)  # "delins" contains "del"
_RANGE = re.compile(r"\d_[A-Za-z*]")
_FIRST_DIGIT = re.compile(r"\d")
# The longest entry read: 2,000 characters hold ~180 three-letter HGVS substitutions
# (``p.[Ala23Val;...]``, 11 characters each), far beyond any multi-mutant in ProteinGym (the
# largest have tens of substitutions). Also keeps a position's digits well under Python's
# 4,300-digit limit on int().
MAX_ENTRY_CHARS = 2_000
# Suggest another numbering only on enough evidence: with 5 substitutions a chance fit at some
# offset of a 300-residue protein has odds of about 300 x (1/20)^5, 1 in 10,000.
MIN_WRONG_FOR_HINT, MIN_CHANGES_FOR_HINT = 3, 5


# --- reading one entry --------------------------------------------------------------------------
def read_changes(text: str, reference: str = "") -> tuple[list[tuple[str, int, str]], VariantIssue | None]:
    """The substitutions an entry names, as written: ``[(wt, number, mt)]`` with one-letter codes.

    Checks notation only (no sequence): malformed text, indels, stops and synonymous or
    non-standard targets are reported; positions and wild-type letters are not checked here.

    Args:
      text: the entry.
      reference: the record's id; a prefix naming another sequence of its kind is refused.

    Returns:
      ``(changes, None)``, or ``([], issue)`` with ``issue.order`` -1 (the caller sets it).
    """
    entry = text.strip()
    odd = non_ascii_digit(entry)
    if odd:
        return [], odd
    plain = _PLAIN_CHANGE.fullmatch(entry)
    if plain and plain.group(1) != plain.group(3):
        return [(plain.group(1), int(plain.group(2)), plain.group(3))], None
    parts, refused = allele_parts(entry, reference)
    if refused:
        return [], refused
    single = len(parts) == 1
    changes = []
    for part in parts:
        problem = _read_change(part)
        if isinstance(problem, VariantIssue):
            quoted = _quote(entry) if single or not part else f"{part} in {_quote(entry)}"
            message = problem.message.replace("{}", quoted)
            return [], dataclasses.replace(problem, text=entry, message=message)
        changes.append(problem)
    if not changes:
        return [], VariantIssue(-1, entry, MALFORMED, f"{_quote(entry)} names no substitution ({EXPECTED})")
    return changes, None


def non_ascii_digit(entry: str) -> VariantIssue | None:
    """Why an entry with a digit outside 0-9 is refused (``M１A``, ``M𝟏A``, ``A١٢C``), or None.
    Python reads them as numbers (``int("١٢")`` is 12), so they were scored as M1A and A12C
    without a word (issue #53). Refused rather than read: HGVS and every variant source write
    ASCII digits, so such a digit comes from a word processor, an input method or a PDF, and the
    user should see the entry as the server read it rather than a guess."""
    if entry.isascii():
        return None
    digit = next((c for c in entry if c.isdigit() and not c.isascii()), None)
    if digit is None:
        return None
    name = unicodedata.name(digit, f"U+{ord(digit):04X}")
    return VariantIssue(-1, entry, MALFORMED, f"{_quote(entry)}: {digit!r} ({name}) is not one of the digits 0-9; "
                                              "write positions with 0-9")


def allele_parts(entry: str, reference: str = "") -> tuple[list[str], VariantIssue | None]:
    """The changes of one allele as written (``p.[Ala23Val;Lys30del]`` -> ``["Ala23Val",
    "Lys30del"]``), or why the entry is refused before any change is read: too long, a
    nucleotide change, another sequence's prefix (``pasted.protein_part``)."""
    odd = non_ascii_digit(entry)
    if odd:
        return [], odd
    if len(entry) > MAX_ENTRY_CHARS:
        return [], VariantIssue(-1, entry, MALFORMED, f"{_quote(entry)} is {len(entry):,} characters long, more "
                                                     f"than the {MAX_ENTRY_CHARS:,} an entry may have ({EXPECTED})")
    protein, refusal = protein_part(entry, reference)
    if refusal:
        return [], VariantIssue(-1, entry, refusal[0], refusal[1].replace("{}", _quote(entry)))
    body = protein[2:] if protein[:2] in ("p.", "P.") else protein
    for opening, closing in ("[]", "()", "()"):  # p.[(...)] is allowed: strip up to two layers
        if body[:1] == opening and body[-1:] == closing:
            body = body[1:-1].strip()
    return _split_changes(body), None


def _split_changes(body: str) -> list[str]:
    """``body`` split at ``;`` and ``:`` with the blanks around them dropped (what the regex
    ``\\s*[;:]\\s*`` did, but linear: that regex is quadratic on a long run of blanks)."""
    if not body:
        return []
    parts = re.split(r"[;:]", body)
    last = len(parts) - 1
    return [part.lstrip() if i == last else part.rstrip() if i == 0 else part.strip()
            for i, part in enumerate(parts)] if last else parts


def _is_indel(part: str) -> bool:
    """True if ``part`` names an indel: a word of ``_INDEL_WORD`` after a digit on the same line,
    or a range."""
    if _RANGE.search(part):
        return True
    for line in part.split("\n"):  # the old pattern's ``.`` did not cross a line break
        first = _FIRST_DIGIT.search(line)
        if first is not None and _INDEL_WORD.search(line, first.end()):
            return True
    return False


def _read_change(part: str) -> tuple[str, int, str] | VariantIssue:
    def issue(kind: str, message: str) -> VariantIssue:
        return VariantIssue(-1, part, kind, message)

    if not part:
        return issue(MALFORMED, f"{{}}: an empty substitution ({EXPECTED})")
    if _is_indel(part):
        return issue(INDEL, "{}: an insertion, deletion, duplication, frameshift or extension; "
                            f"only substitutions can be scored {_BY_SEQUENCE}")
    match = _CHANGE.fullmatch(part)
    if not match:
        return issue(MALFORMED, f"{{}} is not a protein substitution ({EXPECTED})")
    wt, number, mt = (_one_letter(match.group(1)), int(match.group(2)), _one_letter(match.group(3)))
    if wt is None or mt is None:
        code = match.group(1) if wt is None else match.group(3)
        return issue(MALFORMED, f"{{}}: {code!r} is not an amino-acid code")
    if mt == "?":
        return issue(MALFORMED, "{}: '?' (unknown consequence) cannot be scored")
    if match.group(3) in "Xx":  # the legacy stop (W1282X); an unknown residue is never a target
        return issue(STOP, "{}: a stop (nonsense) variant (X is the legacy sign for a stop: HGVS writes "
                           f"p.{wt}{number}*); ESM-2 has no stop token, so it cannot be scored {_BY_SEQUENCE}")
    if "*" in (wt, mt):
        what = "a stop (nonsense) variant" if mt == "*" else "a stop-loss variant"
        hint = f" {_BY_SEQUENCE}" if mt == "*" else ""
        return issue(STOP, f"{{}}: {what}; ESM-2 has no stop token, so it cannot be scored{hint}")
    if mt == "=" or mt == wt:
        return issue(SYNONYMOUS, "{}: synonymous (the amino acid does not change), nothing to score")
    if mt not in STANDARD_AMINO_ACIDS:
        return issue(NON_STANDARD, f"{{}}: {mt} is not one of the 20 standard amino acids")
    return wt, number, mt


def _one_letter(code: str) -> str | None:
    if len(code) == 1:
        return code.upper()
    return CODES.get(code.title())


def _quote(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "…")


def parse_variant(
    text: str, sequence: str, numbering: Numbering = Numbering(), order: int = 0, label: str = "",
    reference: str = "",
) -> Variant | VariantIssue:
    """One entry (``A23V``, ``A23V:G45D``, ``p.[Ala23Val;Gly45Asp]`` ...) checked against ``sequence``.

    Args:
      text: the entry as written.
      sequence: the (wild-type) sequence the positions refer to.
      numbering: how its residues are numbered.
      order: the entry's place in the input.
      label: a user label carried along (the CSV ``label`` column).
      reference: the record's id, checked against a prefix that names a sequence of its kind.

    Returns:
      A ``Variant``, or a ``VariantIssue`` whose message names the entry.
    """
    changes, problem = read_changes(text, reference)
    entry = text.strip()
    if problem is not None:
        return dataclasses.replace(problem, order=order, label=label)
    substitutions, problems, kinds, seen = [], [], [], set()
    for wt, number, mt in changes:
        index = numbering.index_within(number, len(sequence))
        name = f"{wt}{number}{mt}"
        if index is None:
            span = numbering.span_note(len(sequence))
            problems.append(f"{name}: position {number:,} is outside the sequence ({span})")
            kinds.append(OUT_OF_RANGE)
        elif sequence[index] != wt:
            problems.append(f"{name}: the sequence has {sequence[index]} at position {number:,}, not {wt}")
            kinds.append(WRONG_WILD_TYPE)
        elif index in seen:
            problems.append(f"{name}: position {number:,} is mutated twice in one variant")
            kinds.append(REPEATED)
        seen.add(index)
        substitutions.append(Substitution(index, wt, mt))
    if problems:
        # Name the entry as written unless the substitution's own name already is that.
        plain = len(changes) == 1 and entry == "".join(map(str, changes[0]))
        where = "" if plain else f"{_quote(entry)}: "
        return VariantIssue(order, entry, kinds[0], where + "; ".join(problems), label)
    mutant = ":".join(f"{s.wt}{numbering.number(s.index)}{s.mt}" for s in substitutions)
    return Variant(order, entry, mutant, tuple(substitutions), numbering.first, label)


def substitution_names(sequence: str, numbering: Numbering = Numbering()) -> list[str]:
    """``V1A``-style names of every cell of a substitution map, position by position and in
    ``STANDARD_AMINO_ACIDS`` order within one (the rows of ``scores.score_rows``), numbered in
    ``numbering``. The wild type's own letter gives names such as ``V1V`` (score 0)."""
    return [f"{wt}{number}{mt}" for number, wt in zip(numbering.numbers(len(sequence)), sequence)
            for mt in STANDARD_AMINO_ACIDS]


# --- a whole list -------------------------------------------------------------------------------
def parse_mutations(
    text: str | bytes, sequence: str, numbering: Numbering = Numbering(), max_chars: int | None = None,
    reference: str = "",
    max_entries: int | None = None, read: Callable[..., Variant | VariantIssue] | None = None,
) -> tuple[list[Variant], list[VariantIssue]]:
    """Every variant in a pasted list or CSV, checked against ``sequence``.

    Args:
      text: the list (one variant per line, or separated by spaces, commas or semicolons; a
        ``;`` inside ``p.[...]`` joins substitutions) or a CSV with a ``mutant`` column and an
        optional ``label`` column. Bytes are read as UTF-8.
      sequence: the wild-type sequence (validated, uppercase).
      numbering: how its residues are numbered (from 1 unless numbered like a longer entry).
      max_chars: refuse a longer list (bytes: a larger one) before reading any of it; a hosted
        server passes its upload limit, None reads any length.
      reference: the record's id (``pasted``: a prefix naming another sequence is refused).
      max_entries: refuse a list of more entries, once split and before any is read (a hosted
        server's cap: each entry is a row kept with the session's scores).
      read: reads one entry, ``parse_variant``'s arguments (default ``parse_variant``;
        ``indels.parse_mutations`` passes ``indels.parse_variant``, which reads indels too).

    Returns:
      ``(variants, issues)``: both carry ``order``, the entry's place in the input, so the two
      can be merged back into input order. Issues with ``order`` -1 are about the whole input
      (an unreadable file, nothing found, a numbering that looks shifted).
    """
    if max_chars is not None and len(text) > max_chars:
        unit = "bytes" if isinstance(text, bytes) else "characters"
        return [], [VariantIssue(-1, "", INPUT, f"the mutation list is {len(text):,} {unit} long; this server reads "
                                                f"lists of up to {max_chars:,}: split it, or run flamino locally")]
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            return [], [VariantIssue(-1, "", INPUT, f"the mutation list is not UTF-8 text (byte {exc.start:,})")]
    text = text.lstrip("\ufeff")
    entries, problem = table_entries(text) if is_table(text) else (list_entries(text), None)
    if max_entries is not None and len(entries) > max_entries:
        return [], [VariantIssue(-1, "", INPUT, f"the mutation list has {len(entries):,} entries; this server scores "
                                                f"lists of up to {max_entries:,}: split it, or run flamino variants "
                                                "locally")]
    issues = [VariantIssue(-1, "", INPUT, problem)] if problem else []
    variants = []
    for order, (entry, label, row) in enumerate(entries):
        parsed = (read or parse_variant)(entry, sequence, numbering, order, label, reference)
        if isinstance(parsed, Variant):
            variants.append(parsed)
        elif row:  # a table's entries are named by line too
            message = "no mutant" if not entry.strip() else parsed.message
            issues.append(dataclasses.replace(parsed, message=f"line {row}: {message}"))
        else:
            issues.append(parsed)
    if not entries and not issues:
        issues.append(VariantIssue(-1, "", INPUT, "no variants found in the mutation list"))
    shifted = suggest_offset(variants, issues, sequence, numbering)
    if shifted:
        issues.append(VariantIssue(-1, "", WRONG_WILD_TYPE, shifted))
    return variants, issues


def suggest_offset(variants: list[Variant], issues: list[VariantIssue], sequence: str, numbering: Numbering) -> str:
    """A hint when wild-type letters miss but every entry fits under one other numbering than
    ``numbering`` (another first number, which the user sets as the offset), else "".

    An offset fits a substitution if its wild-type letter is where it says under that offset;
    the largest offset that fits every substitution is suggested. Only offsets that put every
    position inside the sequence can fit, a window of at most ``len(sequence)``; each distinct
    substitution narrows it with one array comparison, so a long list of hostile entries costs
    at most ``len(sequence)`` comparisons of that window (counting votes per substitution and
    offset, as this did before, took minutes on 200,000 entries over a one-letter sequence).
    """
    wrong = [i for i in issues if i.kind in (WRONG_WILD_TYPE, OUT_OF_RANGE) and i.order >= 0]
    if len(wrong) < MIN_WRONG_FOR_HINT or not sequence:
        return ""
    changes = [(wt, number) for entry in wrong for wt, number, _ in read_changes(entry.text)[0]]
    changes += [(s.wt, v.numbering.number(s.index)) for v in variants for s in v.substitutions]
    if len(changes) < MIN_CHANGES_FOR_HINT:
        return ""
    numbers = [number for _, number in changes]
    low, high = max(numbers) - len(sequence) + 1, min(numbers)  # offsets keeping all in range
    if low > high:
        return ""
    residues = np.frombuffer(sequence.encode("ascii", "replace"), dtype=np.uint8)
    candidates = np.arange(high - low + 1)  # offset - low
    fits = np.ones(len(candidates), bool)
    for wt, number in dict.fromkeys(changes):
        # number - offset, the 0-based index, is in [0, len(sequence)) for every candidate.
        fits &= residues[(number - low) - candidates] == ord(wt)  # wt: an ASCII letter (_CHANGE)
        if not fits.any():
            return ""
    best = low + int(np.flatnonzero(fits)[-1])
    if best == numbering.first:
        return ""
    return (f"{len(wrong)} of {len(wrong) + len(variants)} variants do not fit the sequence as numbered from "
            f"{numbering.first}, but all of them fit if the numbering starts at {best}: set the offset to {best}")
