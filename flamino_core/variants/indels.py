"""HGVS protein indels, stops and frameshifts, each read into one mutated sequence (``Edit``s of
the wild type), for the strategies that score whole sequences (``sequence_scores``).

Read (one- or three-letter codes, with or without ``p.``, a prefix or ClinVar's name as
``notation`` reads them; several changes of one allele in ``p.[...;...]``):

* deletion ``p.Phe508del``, ``p.Lys23_Val25del``; duplication ``p.Lys23dup``, ``p.Lys23_Val25dup``
* insertion ``p.Gly12_Ala13insVal`` (between two neighbouring residues), ``G12_A13insVQ``
* deletion-insertion ``p.Lys23_Val25delinsAsn``, ``p.Cys28delinsTrpVal``
* stop ``p.Arg97Ter``, ``R97*``, legacy ``R97X``: the protein ends before residue 97
* frameshift with its new stop ``p.Arg97ProfsTer23``, ``R97Pfs*23``, ``p.Arg97fs*2``: the
  protein up to residue 96, then the new residues when all of them are written (``ProfsTer2``:
  Pro then the stop), else nothing more.

Refused, each with its reason: a frameshift without its new stop (``p.Arg97fs``, ``fsTer?``: the
new frame may run past the wild type's end), extensions (``ext``: the new residues are not
written), an insertion of unwritten residues (``insX[5]``, ``ins5``), a stop inside inserted
residues, a change that deletes the whole protein, a stop or frameshift together with other
changes in one allele.

Inserted residues are three-letter when written as ``Val`` (capital, then lower case), else one
letter each (``VQ``). Every pattern is anchored and linear in the entry's length.
"""

from __future__ import annotations

import dataclasses
import re

from flamino_core.alphabet import STANDARD_AMINO_ACIDS
from flamino_core.inputs.numbering import Numbering
from flamino_core.inputs.three_letter import CODES
from flamino_core.variants import notation as n
from flamino_core.variants.variant import (
    DELETION, DELINS, DUPLICATION, FRAMESHIFT, INSERTION, STOP, SUBSTITUTION, Edit, Variant, overlapping,
)

_SITE = r"([A-Za-z]{3}|[A-Za-z*])(\d{1,9})"
_RANGED = re.compile(_SITE + r"(?:_" + _SITE + r")?(delins|del|dup|ins)(.*)", re.DOTALL | re.IGNORECASE)
_STOP = re.compile(_SITE + r"(Ter|TER|ter|\*|X|x)")
_FRAMESHIFT = re.compile(_SITE + r"([A-Za-z]{3}|[A-Za-z])?fs(?:(Ter|TER|ter|\*|X|x)(\d{1,9}|\?))?")
_THREE_LETTER_RUN = re.compile(r"(?:[A-Z][a-z]{2})+")
_EXTENSION = re.compile(r"ext(?:[-*?\d]|Ter)")  # p.Met1ext-5, p.*110Glnext*17, p.Ter110GlnextTer17
EXPECTED = ("expected e.g. p.Phe508del, p.Lys23_Val25del, p.Gly12_Ala13insVal, p.Lys23_Val25delinsAsn, "
            "p.Lys23dup, p.Arg97Ter or p.Arg97ProfsTer2")


@dataclasses.dataclass(frozen=True)
class _Written:
    """One change as written: its kind, the residues it names ``[(wt, number)]`` (a range's two
    ends), the inserted residues, and a frameshift's new stop (residues counted from the first
    changed one, which is 1)."""

    kind: str
    sites: tuple[tuple[str, int], ...]
    inserted: str = ""
    new_stop: int = 0
    new: str = ""  # a frameshift's first new residue, as written (one letter)


def parse_variant(text: str, sequence: str, numbering: Numbering = Numbering(), order: int = 0, label: str = "",
                  reference: str = "") -> Variant | n.VariantIssue:
    """``notation.parse_variant``, with indels, stops and frameshifts read too (the entries it
    refuses as such go to ``parse_indel``)."""
    if n._is_indel(text):  # read once, as an indel (the notation would refuse it, then this read it)
        parsed = parse_indel(text, sequence, numbering, order, label, reference)
        if not (isinstance(parsed, Variant) and all(e.kind == SUBSTITUTION for e in parsed.edits)):
            return parsed  # (a word such as "del" in a gene symbol: substitutions, read below)
    parsed = n.parse_variant(text, sequence, numbering, order, label, reference)
    if isinstance(parsed, n.VariantIssue) and parsed.kind in (n.INDEL, n.STOP):
        return parse_indel(text, sequence, numbering, order, label, reference)
    return parsed


def parse_mutations(text: str | bytes, sequence: str, numbering: Numbering = Numbering(),
                    **options) -> tuple[list, list]:
    """``notation.parse_mutations`` (same arguments), each entry read by ``parse_variant``."""
    return n.parse_mutations(text, sequence, numbering, read=parse_variant, **options)


def parse_indel(text: str, sequence: str, numbering: Numbering = Numbering(), order: int = 0, label: str = "",
                reference: str = "") -> Variant | n.VariantIssue:
    """One entry holding an indel, stop or frameshift (and maybe substitutions), checked against
    ``sequence`` numbered in ``numbering``: a ``Variant`` with ``edits``, or the issue naming it.
    Arguments as ``notation.parse_variant``."""
    entry = text.strip()
    parts, refused = n.allele_parts(entry, reference)
    if refused:
        return dataclasses.replace(refused, order=order, label=label)
    edits, names = [], []
    for part in parts:
        written = _read(part)
        if not isinstance(written, n.VariantIssue):
            written = _place(written, sequence, numbering)
        if isinstance(written, n.VariantIssue):
            where = _quote(entry) if len(parts) == 1 or not part else f"{part} in {_quote(entry)}"
            return n.VariantIssue(order, entry, written.kind, written.message.replace("{}", where), label)
        edits.append(written[0])
        names.append(written[1])
    problem = _allele_problem(edits, sequence, numbering)
    if problem:
        return n.VariantIssue(order, entry, problem[0], f"{_quote(entry)}: {problem[1]}", label)
    return Variant(order, entry, ":".join(names), (), numbering.first, label, tuple(edits))


def _quote(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:60] + "…")


def _issue(kind: str, message: str) -> n.VariantIssue:
    return n.VariantIssue(-1, "", kind, message)


# --- reading one change ------------------------------------------------------------------------
def _read(part: str) -> _Written | n.VariantIssue:
    """A change as written, or why it cannot be read (``{}`` stands for the entry)."""
    if _EXTENSION.search(part):
        return _issue(n.INDEL, "{}: an extension; the residues it adds are not written, so it cannot be scored")
    for read in (_read_frameshift, _read_ranged, _read_stop):
        written = read(part)
        if written is not None:
            return written
    change = n.read_changes(part)  # a substitution, or the notation's own reason
    if change[1] is not None:
        message = change[1].message.replace(_quote(part), "{}")
        if change[1].kind == n.INDEL:
            message = f"{{}} is not an indel flamino reads ({EXPECTED})"
        return _issue(change[1].kind, message)
    (wt, number, mt), = change[0]
    return _Written(SUBSTITUTION, ((wt, number),), mt)


def _code(code: str) -> str | None:
    """One letter for a written residue code (``Lys``, ``K``), None if it names none."""
    return code.upper() if len(code) == 1 else CODES.get(code.title())


def _sites(match: re.Match, groups: tuple[int, ...]) -> tuple[tuple[str, int], ...] | n.VariantIssue:
    sites = []
    for g in groups:
        if match.group(g) is None:
            continue
        wt = _code(match.group(g))
        if wt is None:
            return _issue(n.MALFORMED, f"{{}}: {match.group(g)!r} is not an amino-acid code")
        sites.append((wt, int(match.group(g + 1))))
    return tuple(sites)


def _read_ranged(part: str) -> _Written | n.VariantIssue | None:
    match = _RANGED.fullmatch(part)
    if not match:
        return None
    sites = _sites(match, (1, 3))
    if isinstance(sites, n.VariantIssue):
        return sites
    word, rest = match.group(5).lower(), match.group(6)
    if len(sites) == 2 and sites[1][1] <= sites[0][1]:
        return _issue(n.MALFORMED, f"{{}}: the range ends at {sites[1][1]:,}, before it starts ({sites[0][1]:,})")
    if word in ("del", "dup"):
        if rest:
            return _issue(n.MALFORMED, f"{{}}: nothing follows {word} in HGVS ({EXPECTED})")
        return _Written(DELETION if word == "del" else DUPLICATION, sites)
    if word == "ins" and len(sites) != 2:
        return _issue(n.MALFORMED, "{}: an insertion names the two residues it goes between (p.Gly12_Ala13insVal)")
    inserted = _residues(rest)
    if isinstance(inserted, n.VariantIssue):
        return inserted
    return _Written(INSERTION if word == "ins" else DELINS, sites, inserted)


def _residues(text: str) -> str | n.VariantIssue:
    """Inserted residues, three-letter (``ValGln``) or one-letter (``VQ``)."""
    if not text or not text.isascii() or not text.isalpha() and "*" not in text:
        return _issue(n.INDEL, "{}: the inserted residues are not written out (e.g. insValGln or insVQ), so "
                               "the mutated protein is not known")
    if _THREE_LETTER_RUN.fullmatch(text):
        letters = [CODES.get(text[i:i + 3]) for i in range(0, len(text), 3)]
    else:
        letters = list(text.upper()) if text.isupper() or text == "*" else [None]
    if None in letters:
        return _issue(n.MALFORMED, f"{{}}: {text[:20]!r} is not a run of amino-acid codes (ValGln or VQ)")
    if "*" in letters:
        return _issue(n.STOP, "{}: a stop among the inserted residues; write the truncation as a stop (p.Arg97Ter)")
    odd = sorted(set(letters) - set(STANDARD_AMINO_ACIDS))
    if odd:
        return _issue(n.NON_STANDARD, f"{{}}: {odd[0]} is not one of the 20 standard amino acids")
    return "".join(letters)


def _read_stop(part: str) -> _Written | n.VariantIssue | None:
    match = _STOP.fullmatch(part)
    if not match or match.group(1) == "*":  # a stop-loss (*147Q) keeps the notation's message
        return None
    sites = _sites(match, (1,))
    return sites if isinstance(sites, n.VariantIssue) else _Written(STOP, sites)


def _read_frameshift(part: str) -> _Written | n.VariantIssue | None:
    match = _FRAMESHIFT.fullmatch(part)
    if not match:
        return None
    sites = _sites(match, (1,))
    if isinstance(sites, n.VariantIssue):
        return sites
    stop = match.group(5)
    if stop is None or stop == "?":
        return _issue(n.INDEL, "{}: a frameshift without its new stop (write it as p.Arg97ProfsTer23); the new "
                               "reading frame may run past the wild type's end, so the protein is not known")
    new = _code(match.group(3)) if match.group(3) else ""
    if new is None or (new and new not in STANDARD_AMINO_ACIDS):
        return _issue(n.MALFORMED, f"{{}}: {match.group(3)!r} is not a standard amino-acid code")
    if int(stop) < 1:
        return _issue(n.MALFORMED, "{}: the new stop is counted from the first changed residue, which is 1")
    return _Written(FRAMESHIFT, sites, new if int(stop) == 2 else "", int(stop), new)


# --- a change on the sequence ------------------------------------------------------------------
def _place(written: _Written, sequence: str, numbering: Numbering) -> tuple[Edit, str] | n.VariantIssue:
    """The ``Edit`` a written change makes of ``sequence`` and its one-letter name, or the issue
    (a residue outside the sequence or not the one named, a change that changes nothing)."""
    indices = []
    for wt, number in written.sites:
        index = numbering.index_within(number, len(sequence))
        if index is None:
            return _issue(n.OUT_OF_RANGE, f"{{}}: position {number:,} is outside the sequence "
                                          f"({numbering.span_note(len(sequence))})")
        if sequence[index] != wt:
            return _issue(n.WRONG_WILD_TYPE,
                          f"{{}}: the sequence has {sequence[index]} at position {number:,}, not {wt}")
        indices.append(index)
    start, last = indices[0], indices[-1]
    site = "_".join(f"{wt}{number}" for wt, number in written.sites)
    kind = written.kind
    if kind == SUBSTITUTION:
        return Edit(start, start + 1, written.inserted, kind), f"{site}{written.inserted}"
    if kind == INSERTION:
        if last != start + 1:
            return _issue(n.MALFORMED, "{}: an insertion goes between two neighbouring residues (e.g. Gly12_Ala13)")
        return Edit(last, last, written.inserted, kind), f"{site}ins{written.inserted}"
    if kind in (STOP, FRAMESHIFT):
        if start == 0:
            return _issue(n.INDEL, "{}: ends the protein before its first residue: no protein is left to score")
        name = f"{site}*" if kind == STOP else f"{site}{written.new}fs*{written.new_stop}"
        return Edit(start, len(sequence), written.inserted, kind), name
    inserted = {DELETION: "", DUPLICATION: "", DELINS: written.inserted}[kind]  # a duplication's: when applied
    if kind == DELINS and inserted == sequence[start:last + 1]:
        return _issue(n.SYNONYMOUS, "{}: synonymous (the residues do not change), nothing to score")
    word = {DELETION: "del", DUPLICATION: "dup", DELINS: "delins"}[kind]
    return Edit(start, last + 1, inserted, kind), f"{site}{word}{written.inserted if kind == DELINS else ''}"


def _allele_problem(edits: list[Edit], sequence: str, numbering: Numbering) -> tuple[str, str] | None:
    """(kind, message) when the changes of one allele cannot be applied together, else None."""
    if len(edits) > 1 and any(e.kind in (STOP, FRAMESHIFT) for e in edits):
        return n.INDEL, "a stop or frameshift together with other changes; give it as an entry of its own"
    clash = overlapping(edits)
    if clash:
        where = numbering.number(clash[1].start)
        return n.REPEATED, f"two changes touch position {where:,}; give them as one (delins)"
    if len(sequence) + sum(e.growth for e in edits) <= 0:  # counted, not built
        return n.INDEL, "deletes the whole protein: nothing is left to score"
    return None


# --- a mutated sequence given whole (ProteinGym's indel tables) ----------------------------------
def from_sequence(wild: str, mutated: str, numbering: Numbering = Numbering(), order: int = 0,
                  label: str = "") -> Variant | n.VariantIssue:
    """The variant that turns ``wild`` into ``mutated``, as one edit: the span between their
    longest common start and end, replaced (a row of ProteinGym's indel tables gives only the
    mutated sequence). A duplication or a repeat-shifted indel is placed as far to the
    C-terminal end as the common start allows; the mutated sequence, all that is scored, is
    ``mutated`` whatever the placement."""
    mutated = mutated.strip().upper()
    odd = sorted(set(mutated) - set(STANDARD_AMINO_ACIDS))
    if odd or not mutated:
        what = f"{odd[0]!r} is not one of the 20 standard amino acids" if odd else "it is empty"
        return n.VariantIssue(order, mutated[:60], n.NON_STANDARD if odd else n.MALFORMED,
                              f"mutated_sequence cannot be scored: {what}", label)
    if mutated == wild:
        return n.VariantIssue(order, mutated[:60], n.SYNONYMOUS, "mutated_sequence is the wild type", label)
    start = next((i for i, (a, b) in enumerate(zip(wild, mutated)) if a != b), min(len(wild), len(mutated)))
    tail = min(len(wild), len(mutated)) - start  # the common end may not overlap the common start
    same = next((k for k in range(tail) if wild[len(wild) - 1 - k] != mutated[len(mutated) - 1 - k]), tail)
    end, inserted = len(wild) - same, mutated[start:len(mutated) - same]
    if end == start:
        kind, word = INSERTION, "ins"
    elif not inserted:
        kind, word = DELETION, "del"
    else:
        kind, word = (SUBSTITUTION, "") if end - start == 1 and len(inserted) == 1 else (DELINS, "delins")
    span = _span(wild, start, end, numbering)
    edit = Edit(start, end, inserted, kind)
    name = f"{span}{word}{inserted if kind != DELETION else ''}"
    return Variant(order, mutated[:60], name, (), numbering.first, label, (edit,))


def _span(wild: str, start: int, end: int, numbering: Numbering) -> str:
    """The residues an edit of ``start:end`` names, HGVS-like: ``K2``, ``K2_L4``, an insertion's
    two neighbours ``G6_H7`` (its one neighbour at either end of the protein)."""
    def site(i: int) -> str:
        return f"{wild[i]}{numbering.number(i)}"

    if end > start:
        return site(start) + (f"_{site(end - 1)}" if end - start > 1 else "")
    return "_".join(site(i) for i in (start - 1, start) if 0 <= i < len(wild))
