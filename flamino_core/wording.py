"""Words that messages build from values: the indefinite article before a generated word, and a
number of bytes (``byte_size``: every size flamino shows, in binary units).

Light (no imports beyond the standard library), shared by the core's messages and the app's.
"""

from __future__ import annotations

import re

# Words starting with a vowel letter but a consonant sound ("a unique", "a one-residue", "a UniProt
# accession", "a European"); checked lowercased against the word's start.
_CONSONANT_SOUND = ("uni", "use", "usu", "one", "once", "eu", "ura")
# ... and with a consonant letter but a vowel sound ("an hour", "an honest").
_VOWEL_SOUND = ("hour", "honest", "honour", "heir")


def _number_takes_an(digits: str) -> bool:
    """Whether a number read aloud starts with a vowel sound: eight, eleven, eighteen, eighty,
    eight hundred, eleven thousand ... ; its first spoken group is the digits before the first
    thousands separator (1,800 is "one thousand ...": "a")."""
    lead = digits[: len(digits) % 3 or 3]
    return lead.startswith("8") or lead in ("11", "18")


def article(word: str) -> str:
    """"a" or "an" for ``word`` as it is read aloud: "an insertion", "a deletion", "an ESM-2
    model", "a SaProt model", "an 8-layer model", "an 11-residue peptide", "a 1,800-residue chain"."""
    number = re.match(r"[\d,]+", word)
    if number:
        return "an" if _number_takes_an(number.group().replace(",", "")) else "a"
    lower = word.lower()
    if lower.startswith(_CONSONANT_SOUND):
        return "a"
    if lower.startswith(_VOWEL_SOUND):
        return "an"
    return "an" if lower[:1] in ("a", "e", "i", "o", "u") else "a"


def with_article(word: str) -> str:
    """``word`` after its indefinite article: ``with_article("insertion") == "an insertion"``."""
    return f"{article(word)} {word}"


KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def byte_size(n: int) -> str:
    """Bytes as people read them, in binary units (memory is counted in them, and one unit
    everywhere keeps two figures comparable): ``13.1 GiB``, ``920 MiB``, ``1.43 MiB``, ``12 KiB``,
    ``512 bytes``."""
    if n >= GIB:
        return f"{n / GIB:,.1f} GiB"
    for unit, name in ((MIB, "MiB"), (KIB, "KiB")):
        if n >= unit:
            value = n / unit
            return f"{value:.2f} {name}" if value < 10 else f"{value:,.0f} {name}"
    return f"{n:,} bytes"
