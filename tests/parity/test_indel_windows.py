"""Indels of long proteins (issue #38, item 4): when the wild type or its mutant is longer than
ESM-2's 1,022 residues, both are cut to one window holding the edit, with the same flanks, and
the PLL ratio compares those two windows (``windows.edit_window``, ``sequence_scores.scored_pair``).

The protein is real: NPC1_HUMAN, 1,278 residues, a ProteinGym target
(``../shared/fasta/proteingym_targets.fa``). The reference for each score is HF transformers'
``EsmForMaskedLM`` on the same random weights (never biology), the PLL written here from its
definition on the two windows, each scored as a sequence of its own (<cls> window <eos>).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from flamino_core import Engine, load_weights
from flamino_core.model.config import MAX_RESIDUES
from flamino_core.engine.windows import edit_window, window_starts
from flamino_core.variants import substitution_maps as scores
from flamino_core.variants.indels import parse_mutations
from flamino_core.variants.scoring import score_variants
from flamino_core.variants.sequence_scores import pass_plan, scored_pair
from conftest import TINY
from test_indel_scores import hf_pll, masked_counter  # noqa: F401 (a fixture)

# As tests/parity/test_indel_scores.py: each log-probability agrees with HF to ~1e-5; a PLL difference of
# two ~1,000-residue windows sums ~2,000 of them with rounding errors of both signs: measured, the
# worst of the six scores differed by 3.3e-5 (the test prints it), 3 times under the issue's
# bound; a wrong window or context moves a score by far more (a modelling error moves each term
# by 4.5e-4 or more).
ATOL = 1e-4


@pytest.fixture(scope="module")
def npc1(real_sequences) -> str:
    sequence = real_sequences["NPC1_HUMAN"]
    assert len(sequence) == 1278
    return sequence


def entries(w: str) -> dict[str, tuple[int, int, int]]:
    """Entry -> (first touched residue, last touched residue, net length change), 0-based."""
    return {
        f"{w[99]}100del": (99, 99, -1),  # near the N-terminus: the first window
        f"{w[699]}700_{w[700]}701insGW": (699, 700, 2),  # the middle; an insertion shrinks the windows
        f"{w[1229]}1230_{w[1231]}1232delinsK": (1229, 1231, -2),  # near the C-terminus: the last window
        f"{w[639]}640A" if w[639] != "A" else f"{w[639]}640G": (639, 639, 0),
        f"{w[300]}301_{w[899]}900del": (300, 899, -600),  # wider than half a window: centred on it
    }


# --- the window, as pure arithmetic -----------------------------------------------------------------
def test_the_window_holds_the_edit_and_both_sequences_fit():
    rng = random.Random(38)
    for _ in range(3000):
        length = rng.randint(1023, 4000) if rng.random() < 0.8 else rng.randint(900, 1022)
        growth = rng.choice([0, 0, 1, 5, 40])
        low = rng.randrange(length)
        high = min(length - 1, low + rng.choice([0, 1, 2, 10, 300, 700]))
        size = min(length, MAX_RESIDUES - growth)
        if high - low + 1 > size:
            with pytest.raises(ValueError, match="more than one 1,022-residue window"):
                edit_window(length, low, high, growth)
            continue
        start, end = edit_window(length, low, high, growth)
        assert end - start == size and 0 <= start <= low and high < end <= length
        assert end - start + growth <= MAX_RESIDUES  # the mutant's window fits the model too
        grid = window_starts(length, size, size // 2)
        holding = [s for s in grid if s <= low and high < s + size]
        if holding:  # the grid window with the most residues on the edit's shorter side, the first on a tie
            best = max(holding, key=lambda s: (min(low - s, s + size - 1 - high), -s))
            assert start == best
        else:  # no grid window holds it: centred on it
            assert abs((start + end - 1) / 2 - (low + high) / 2) <= 1 or start in (0, length - size)


def test_windows_are_the_unmasked_windows_when_nothing_is_inserted(npc1):
    """A deletion, delins or substitution reads one of the windows every unmasked pass uses, so the
    variants in one region share their wild-type window and its passes."""
    variants, issues = parse_mutations(", ".join(entries(npc1)), npc1)
    assert not issues
    for v, (low, high, change) in zip(variants, entries(npc1).values()):
        pair = scored_pair(npc1, v)
        start, end = pair.window
        assert pair.wild == npc1[start:end] and start <= low and high < end
        mutant = v.apply(npc1)
        assert pair.mutant == mutant[start:end + change]  # the same flanks: residues before and after
        assert mutant[:start] == npc1[:start] and mutant[end + change:] == npc1[end:]
        assert max(len(pair.wild), len(pair.mutant)) <= MAX_RESIDUES
        if change <= 0 and high - low < MAX_RESIDUES // 2:
            assert start in window_starts(len(npc1)) and end - start == MAX_RESIDUES
    assert scored_pair(npc1, variants[1]).window == (258, 1278)  # 1,020 residues: the mutant's 1,022


# --- scores ----------------------------------------------------------------------------------------------
def test_long_indels_match_hf_on_their_windows(hf_checkpoints, npc1):
    """wt-pll-approx (one unmasked pass per window) on NPC1's five edits, and on an insertion that
    takes a 1,015-residue wild type past 1,022: each score is HF's PLL of the mutant's window minus
    that of the wild type's (one unmasked pass each, written in tests/parity/test_indel_scores.py from
    the definition), the windows checked here to hold the edit with the same flanks."""
    directory, hf = hf_checkpoints(TINY, "5x")
    engine = Engine(load_weights(str(directory)))
    short = npc1[:1015]
    cases = [(npc1, entries(npc1))]
    cases.append((short, {f"{short[499]}500_{short[500]}501ins{'W' * 10}": (499, 500, 10)}))
    worst = 0.0
    for wild, listed in cases:
        variants, _ = parse_mutations(", ".join(listed), wild)
        result = score_variants(engine, wild, variants, "wt-pll-approx")
        assert "window of the wild type holding the edit" in " ".join(result.notes)
        for row, (v, (low, high, change)) in enumerate(zip(variants, listed.values())):
            mutant = v.apply(wild)
            start, end = scored_pair(wild, v).window
            assert end - start == min(len(wild), MAX_RESIDUES - max(change, 0)) and start <= low and high < end
            reference = hf_pll(hf, mutant[start:end + change], False, False) - hf_pll(hf, wild[start:end], False, False)
            score = result.table.score[row]
            assert result.table.status[row] == "ok" and abs(score - reference) < ATOL, (v.text, score, reference)
            worst = max(worst, abs(score - reference))
    print(f"worst difference from HF {worst:.2e}")


def test_long_pll_runs_the_windows_once_and_scores_them_as_short_sequences(npc1, masked_counter):  # noqa: F811
    """pll on a deletion in NPC1's first window and a stop near its end: the plan (said first)
    counts exactly the passes that run: the wild type's window once (a substitution in the same
    window would share it), the mutant's window once, for the stop only the wild type's lost
    residues (ProteinGym's window of each). The deletion's score is pll of the two windows scored
    as a short wild type and its variant (the path tests/parity/test_indel_scores.py checks against HF),
    read from the store; the stop's, the lowest masked-marginals score over the residues it loses.
    About 30 s on 2 busy cores: two 1,022-residue windows masked residue by residue, the least
    that shows pll's windows on a real long protein (HF's masked PLL of them would take minutes)."""
    engine = Engine(load_weights("random:tiny"))
    w = npc1
    listed = [f"{w[99]}100del", f"{w[1269]}1270*", f"{w[119]}120{'A' if w[119] != 'A' else 'G'}"]
    variants, issues = parse_mutations(", ".join(listed), w)
    assert not issues
    shared = pass_plan(w, variants, "pll")
    assert shared.wild_types == (w[:MAX_RESIDUES],)  # one window for the deletion and the substitution
    assert shared.total == MAX_RESIDUES + (len(w) - 1269) + (MAX_RESIDUES - 1) + MAX_RESIDUES
    assert "1 window of at most 1,022 residues holding the edits" in shared.describe(3)
    plan = pass_plan(w, variants[:2], "pll")
    result = score_variants(engine, w, variants[:2], "pll")
    assert masked_counter["passes"] == plan.total == result.passes == MAX_RESIDUES + 9 + MAX_RESIDUES - 1
    window, _ = parse_mutations(listed[0], w[:MAX_RESIDUES])
    again = score_variants(engine, w[:MAX_RESIDUES], window, "pll").table.score[0]
    assert result.table.score[0] == pytest.approx(again, abs=1e-9)
    lost = scores.substitution_map(engine, w, "masked-marginals", positions=range(1269, len(w))).substitutions
    assert result.table.score[1] == pytest.approx(float(np.min(lost)), abs=1e-6)
    assert masked_counter["passes"] == plan.total  # both read from the store: nothing ran again
