"""Issue #53 (and #51 item 4): indel lists bounded by the work and memory they imply, not only by
their entry count, and the mutation lists' low rows (digits outside 0-9).

20,000 duplications of ~1,900 residues (269 kB) against a 2,000-residue record kept a tuple of
every position each one covered (38.5 million positions), ran 150 s and took the server from 2.2
to 5.5 GiB while the page said "nothing to run". Each hostile list here is generated small in the
test; its expected sequences and counts are worked out by hand from the HGVS rules.
"""

from __future__ import annotations

import random
import time
import tracemalloc

import pytest

from flamino_core.options import PLL_HOSTED_MAX_PASSES
from flamino_core.variants.indels import parse_mutations
from flamino_core.variants.notation import Variant
from flamino_core.variants.scoring import passes_problem, score_variants

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
RECORD = "".join(random.Random(53).choices(AMINO_ACIDS, k=2_000))
MAX_PASSES = PLL_HOSTED_MAX_PASSES  # the hosted FLAMINO_MAX_PLL_PASSES default (docs/deploy.md)
# Seconds one list may take to be read, planned and checked against the limit, and its positions
# listed. Measured on this 2-core machine at load 6-7 (five agents): 0.6-3.9 s per kind; on a
# quiet machine under 2 s (docs/reliability.md). Before the change the duplications alone took
# 51 s to plan, 42 s to check and 90 s to list their positions: the bound separates the two.
SECONDS = 20.0


def _site(i: int) -> str:
    """``K23``: the record's residue at 1-based position ``i``."""
    return f"{RECORD[i - 1]}{i}"


def _hostile(kind: str) -> str:
    """The attack lists of issues #51 and #53, generated (none over the hosted 2 MB upload)."""
    rng = random.Random(kind)
    if kind == "large duplications":  # 20,000 x ~1,900 residues
        return "\n".join(f"{_site(1 + i % 50)}_{_site(1_900 + i % 100)}dup" for i in range(20_000))
    if kind == "long insertions":  # 490 x 1,960 inserted residues (~1 MB)
        return "\n".join(f"{_site(1 + i % 1_999)}_{_site(2 + i % 1_999)}ins"
                         + "".join(rng.choice(AMINO_ACIDS) for _ in range(1_960)) for i in range(490))
    if kind == "long delins":  # 20,000 x ~1,900 residues replaced by 5
        return "\n".join(f"{_site(1 + i % 50)}_{_site(1_900 + i % 100)}delins"
                         + "".join(rng.choice(AMINO_ACIDS) for _ in range(5)) for i in range(20_000))
    if kind == "multi-allele duplications":  # 400 entries of 48 ten-residue duplications each
        return "\n".join("p.[" + ";".join(f"{_site(j)}_{_site(j + 9)}dup" for j in range(1 + i % 7, 1_900, 40)) + "]"
                         for i in range(400))
    assert kind == "short duplications"  # 20,000 at distinct places: each its own mutant, many passes
    return "\n".join(f"{_site(1 + i % 1_990)}_{_site(2 + i % 1_990 + i // 1_990)}dup" for i in range(20_000))


def test_an_edit_is_kept_by_the_ends_of_its_range_and_applied_when_asked():
    """A duplication of residues 3-1,902 keeps two positions and no copy of the range; its
    mutated sequence is still the range twice (by hand: the record's first 1,902 residues, then
    residues 3-1,902 again, then the rest)."""
    variants, issues = parse_mutations(f"{_site(3)}_{_site(1_902)}dup {_site(5)}_{_site(6)}insWW", RECORD)
    assert not issues
    dup, insertion = variants
    assert dup.positions == (3, 1_902) and dup.edits[0].inserted == ""
    assert dup.apply(RECORD) == RECORD[:1_902] + RECORD[2:1_902] + RECORD[1_902:]
    assert dup.growth == 1_900 and len(dup.apply(RECORD)) == 3_900
    assert insertion.positions == (5, 6) and insertion.apply(RECORD) == RECORD[:5] + "WW" + RECORD[5:]


@pytest.mark.parametrize("kind", ["large duplications", "long insertions", "long delins",
                                  "multi-allele duplications", "short duplications"])
def test_every_kind_of_hostile_indel_list_is_planned_or_refused_fast_in_memory_linear_in_its_bytes(kind):
    """Read, planned against FLAMINO_MAX_PLL_PASSES (stopping at the limit) and listed by position
    within ``SECONDS``; and, traced on its first tenth (tracemalloc slows Python code several
    fold), a peak of Python memory under 2 kB per entry plus 40 bytes per byte of the list: an
    entry's Variant and name are a few hundred bytes, each edit (~14 bytes of text in a
    multi-allele entry) an Edit object, its name and its place in tuples (~300 bytes), and a
    planned mutant window is at most 1,022 residues. Before, the large duplications' positions
    alone were 72 kB per entry (1.4 GB)."""
    text = _hostile(kind)
    assert len(text.encode()) < 2_000_000  # under the hosted upload cap: only the new bounds refuse it
    started = time.monotonic()
    problem, variants, issues = _read_and_plan(text)
    seconds = time.monotonic() - started
    assert not issues and len(variants) == len(text.splitlines())
    assert seconds < SECONDS, f"{kind}: {seconds:.1f} s"
    if kind == "short duplications":  # 20,000 mutants of ~2,000 residues: over the limit, said so
        assert problem and f"at most {MAX_PASSES:,}" in problem and "needs at least" in problem
    else:  # no mutant fits one window, or the plan is under the limit
        assert problem is None, problem
    assert sum(len(v.positions) for v in variants) <= 2 * sum(len(v.edits) for v in variants)  # ends only

    tenth = "\n".join(text.splitlines()[: max(len(variants) // 10, 40)])
    tracemalloc.start()
    _read_and_plan(tenth)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    entries = len(tenth.splitlines())
    assert peak < 2_000 * entries + 40 * len(tenth), f"{kind}: {peak / 1e6:.1f} MB for {entries:,} entries"


def _read_and_plan(text: str):
    """(the hosted refusal or None, variants, issues) of a list, its positions listed as the table does."""
    variants, issues = parse_mutations(text, RECORD)
    problem = passes_problem(RECORD, variants, "pll", MAX_PASSES)
    [v.positions for v in variants]
    return problem, variants, issues


class _NoEngine:
    """An engine that fails any use: a list that needs no pass must not touch the model."""

    is_random = False

    def __getattr__(self, name):
        raise AssertionError(f"the engine was used ({name}) for a list that needs nothing run")


def test_a_list_that_needs_nothing_run_runs_nothing_and_says_why_for_each_entry():
    """The large duplications cannot be scored in one 1,022-residue window: each row says so, and
    no model pass (no engine use at all) is made, in seconds."""
    variants, _ = parse_mutations(_hostile("large duplications"), RECORD)
    started = time.monotonic()
    scored = score_variants(_NoEngine(), RECORD, variants, "pll")
    assert time.monotonic() - started < SECONDS
    assert scored.passes == 0 and len(scored.table) == 20_000
    assert scored.table["status"].str.contains("cannot be scored in one window").all()


@pytest.mark.parametrize("entry, digit, name", [
    ("M１A", "１", "FULLWIDTH DIGIT ONE"),
    ("M𝟏A", "𝟏", "MATHEMATICAL BOLD DIGIT ONE"),
    ("A١٢C", "١", "ARABIC-INDIC DIGIT ONE"),
    ("p.Met１del", "１", "FULLWIDTH DIGIT ONE"),
    ("p.[M1A;K２V]", "２", "FULLWIDTH DIGIT TWO"),
])
def test_digits_outside_0_to_9_are_refused_naming_the_character(entry, digit, name):
    """Python reads ``int("١٢")`` as 12: these were scored as M1A and A12C without a word."""
    sequence = "MKAAAAAAAAAAC"
    variants, issues = parse_mutations(entry, sequence)
    assert not variants and len(issues) == 1
    assert issues[0].kind == "malformed" and f"{digit!r} ({name}) is not one of the digits 0-9" in issues[0].message
    assert isinstance(parse_mutations("M1A", sequence)[0][0], Variant)  # the same entry in ASCII digits reads


def test_the_position_filter_keeps_an_indel_whose_range_covers_it():
    """An indel's positions are the ends of its range: the table's position filter keeps a
    duplication of 3-1,902 for positions 100-200 (inside it, neither end), as it kept it when
    every position was listed; a substitution at 50 is not kept."""
    from flamino_core.variants.scoring import filter_scored

    variants, _ = parse_mutations(f"{_site(3)}_{_site(1_902)}dup {_site(50)}{'A' if RECORD[49] != 'A' else 'C'}",
                                  RECORD)
    import pandas as pd

    table = pd.DataFrame({"status": ["ok", "ok"], "score": [-1.0, -1.0], "kind": [v.kind for v in variants],
                          "positions": [v.positions for v in variants]})
    kept = filter_scored(table, 100, 200)
    assert list(kept["kind"]) == ["duplication"]
    assert len(filter_scored(table, 40, 60)) == 2


def test_header_metadata_of_mixed_types_reaches_arrow_without_a_traceback():
    """100 records x 300 characters of ``key=value`` headers (issue #53: 2,387 metadata columns,
    a Streamlit Arrow traceback at every render): a column mixing text, numbers and blanks was
    handed to Arrow as is, which cannot type it. Each shown column now has one type, and the
    values read as written."""
    import pyarrow as pa

    from app_pages.records import shown_frame
    from flamino_core.inputs.fasta import parse_fasta_text
    from flamino_core.records.summary import summary_rows

    rng = random.Random(53)
    lines, written = [], {}
    for r in range(100):
        keys = rng.sample(range(3_000), 40)  # 40 distinct keys: ~330 characters a header
        written[f"rec{r}"] = {f"k{k}": rng.choice(["x", "1", "2.5", "yes", "abc"]) for k in keys}
        lines += [f">rec{r} " + " ".join(f"{k}={v}" for k, v in written[f"rec{r}"].items()), "MKV" * 10]
    records = parse_fasta_text("\n".join(lines)).records
    import pandas as pd

    frame = shown_frame(pd.DataFrame(summary_rows(records, {}, {})))
    pa.Table.from_pandas(frame)  # raised ArrowInvalid ("Could not convert '' ... to double")
    written = {r.id: _pairs(r.description) for r in records}
    columns = [c for c in frame.columns if c.startswith("k")]
    assert columns  # the keys most records share (metadata.MAX_HEADER_COLUMNS of them)
    for column in columns:
        for record_id, value in zip(frame["id"], frame[column]):
            as_written = written[record_id].get(column, "")
            assert str(value) == as_written or _same_number(value, as_written), (record_id, column, value)


def _pairs(header: str) -> dict[str, str]:
    """``key=value`` pairs of a header as the record kept it (its first 300 characters: the last
    pair may be cut), a value running on over words without ``=`` (UniProt's ``OS=Homo sapiens``)."""
    pairs, key = {}, None
    for token in header.split():  # (the id, if there, has no "=")
        if "=" in token:
            key, value = token.split("=", 1)
            pairs[key] = value
        elif key is not None:
            pairs[key] += " " + token
    return pairs


def _same_number(value, text: str) -> bool:
    """``2.5`` shown for ``2.5`` written, ``1`` for ``1``: a header's number may be kept as one."""
    try:
        return float(value) == float(text)
    except ValueError:
        return False
