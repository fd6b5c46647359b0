"""Variant scores against HF transformers' masked passes, pass counts, windows, hosted limits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flamino_core import Engine, load_weights
from flamino_core.alphabet import MASK_IDX, batch_encode
from flamino_core.variants.notation import parse_mutations
from flamino_core.variants.scoring import (
    PLL_HOSTED_MAX_PASSES,
    output_columns,
    pll_passes,
    pll_size_problem,
    score_variants,
)
from conftest import T6, TINY
from reference_checkpoints import hf_forward
from test_long_windows import proteingym_get_optimal_window, proteingym_masked_log_probs

# The parity bound of tests/parity/test_parity.py (1e-4 on log-probabilities; measured there to sit
# several times above fp32 noise). A variant score is a sum of 2K log-probabilities, K <= 3 here,
# so its rounding error stays within the same bound with room (measured below 2e-5).
ATOL = 1e-4
AAS = "ACDEFGHIKLMNPQRSTVWY"


def hf_masked_log_probs(hf, sequence: str, masked_sets: list[list[int]]) -> list[np.ndarray]:
    """HF's log-softmax at the masked positions of each row; row r masks every index of set r."""
    tokens = np.repeat(batch_encode([sequence]), len(masked_sets), axis=0)
    for row, masked in enumerate(masked_sets):
        tokens[row, np.array(masked) + 1] = MASK_IDX
    log_probs = torch.log_softmax(hf_forward(hf, tokens).logits.double(), -1).numpy()
    return [log_probs[row, np.array(masked) + 1] for row, masked in enumerate(masked_sets)]


def esm_index(letter: str) -> int:
    import esm  # fair-esm's alphabet, independent of ours

    return esm.data.Alphabet.from_architecture("ESM-1b").get_idx(letter)


def random_variants(sequence: str, rng, count: int, max_size: int) -> list[tuple[tuple[int, str, str], ...]]:
    """Random (index, wt, mt) tuples at distinct positions, mt != wt."""
    out = []
    for _ in range(count):
        size = int(rng.integers(1, max_size + 1))
        indices = sorted(rng.choice(len(sequence), size=size, replace=False))
        out.append(tuple((int(i), sequence[i], str(rng.choice([a for a in AAS if a != sequence[i]]))) for i in indices))
    return out


def spelled(variant) -> str:
    return ":".join(f"{wt}{i + 1}{mt}" for i, wt, mt in variant)


@pytest.fixture(scope="module")
def tiny_engine():
    return Engine(load_weights("random:tiny:1"))


@pytest.mark.parametrize("config", [TINY, T6], ids=["tiny", "t6"])
def test_masked_marginals_and_joint_masked_match_hf(hf_checkpoints, real_sequences, config):
    directory, hf = hf_checkpoints(config, "5x")
    engine = Engine(load_weights(str(directory)))
    sequence = real_sequences["HBB_HUMAN"]
    rng = np.random.default_rng(11)
    chosen = random_variants(sequence, rng, 12, 3)
    variants, issues = parse_mutations(" ".join(spelled(v) for v in chosen), sequence)
    assert not issues and len(variants) == len(chosen)
    joint = score_variants(engine, sequence, variants, "joint-masked").table
    additive = score_variants(engine, sequence, variants, "masked-marginals").table

    positions = sorted({i for v in chosen for i, _, _ in v})
    single = dict(zip(positions, hf_masked_log_probs(hf, sequence, [[p] for p in positions])))
    together = hf_masked_log_probs(hf, sequence, [[i for i, _, _ in v] for v in chosen])
    for row, (variant, at_joint) in enumerate(zip(chosen, together)):
        ref_additive = sum(single[i][0, esm_index(mt)] - single[i][0, esm_index(wt)] for i, wt, mt in variant)
        ref_joint = sum(at_joint[k, esm_index(mt)] - at_joint[k, esm_index(wt)] for k, (_, wt, mt) in enumerate(variant))
        assert abs(additive.score[row] - ref_additive) < ATOL, spelled(variant)
        assert abs(joint.score[row] - ref_joint) < ATOL, spelled(variant)
        assert abs(joint.non_additivity[row] - (ref_joint - ref_additive)) < 2 * ATOL, spelled(variant)
    assert (joint.status == "ok").all() and list(joint.mutant) == [spelled(v) for v in chosen]
    # A multi-mutant's joint pass is a different input: non-additivity is not zero there.
    assert np.abs(joint.non_additivity[[len(v) > 1 for v in chosen]]).min() > 1e-6


def test_wt_marginals_and_pll_match_hf(hf_checkpoints, real_sequences):
    directory, hf = hf_checkpoints(TINY, "5x")
    engine = Engine(load_weights(str(directory)))
    sequence = real_sequences["HBB_HUMAN"][:60]
    chosen = random_variants(sequence, np.random.default_rng(5), 4, 2)
    variants, _ = parse_mutations(" ".join(spelled(v) for v in chosen), sequence)

    unmasked = torch.log_softmax(hf_forward(hf, batch_encode([sequence])).logits.double(), -1).numpy()[0, 1:-1]
    wt = score_variants(engine, sequence, variants, "wt-marginals")
    for row, variant in enumerate(chosen):
        ref = sum(unmasked[i, esm_index(mt)] - unmasked[i, esm_index(w)] for i, w, mt in variant)
        assert abs(wt.table.score[row] - ref) < ATOL
    assert wt.passes == 1

    def hf_pll(seq: str) -> float:
        at = hf_masked_log_probs(hf, seq, [[i] for i in range(len(seq))])
        return sum(float(at[i][0, esm_index(aa)]) for i, aa in enumerate(seq))

    pll = score_variants(engine, sequence, variants, "pll")
    wild = hf_pll(sequence)
    for row, variant in enumerate(chosen):
        mutant = list(sequence)
        for i, _, mt in variant:
            mutant[i] = mt
        # A sum of L = 60 log-probabilities on each side: up to 120 terms, so 10x the bound.
        assert abs(pll.table.score[row] - (hf_pll("".join(mutant)) - wild)) < 10 * ATOL
    assert pll.passes == len(sequence) * (len(chosen) + 1)


class RowCounter:
    """Wraps an engine's jitted function; records how many real rows (with a <mask>) it was sent."""

    def __init__(self, engine, name: str):
        self.engine, self.name, self.inner = engine, name, getattr(engine, name)
        self.masked_rows, self.rows, self.masks_per_row = 0, 0, []

    def __call__(self, state, tokens, *args, **kwargs):
        array = np.asarray(tokens)
        masks = (array == MASK_IDX).sum(axis=1)
        self.rows += len(array)
        self.masked_rows += int((masks > 0).sum())
        self.masks_per_row += [int(n) for n in masks if n]
        return self.inner(state, tokens, *args, **kwargs)

    def __enter__(self):
        setattr(self.engine, self.name, self)
        return self

    def __exit__(self, *exc):
        setattr(self.engine, self.name, self.inner)


def test_k_variants_at_k_positions_run_k_masked_passes_not_l(tiny_engine):
    rng = np.random.default_rng(3)
    sequence = "".join(rng.choice(list(AAS), size=500))
    indices = sorted(rng.choice(500, size=20, replace=False))
    text = " ".join(f"{sequence[i]}{i + 1}{'A' if sequence[i] != 'A' else 'G'}" for i in indices)
    # The same positions again in a multi-mutant: no new position, so no new pass.
    text += f" {sequence[indices[0]]}{indices[0] + 1}W:{sequence[indices[1]]}{indices[1] + 1}W"
    variants, issues = parse_mutations(text, sequence)
    assert len(variants) == 21 and not issues
    with RowCounter(tiny_engine, "_masked_log_probs") as masked, RowCounter(tiny_engine, "_forward") as forward:
        result = score_variants(tiny_engine, sequence, variants, "masked-marginals")
    assert masked.masked_rows == 20 and masked.masks_per_row == [1] * 20
    assert masked.rows <= 32  # padded to a power of two at most, never 500
    assert forward.rows == 0 and result.passes == 20

    with RowCounter(tiny_engine, "_masked_log_probs") as masked, RowCounter(tiny_engine, "_forward") as forward:
        joint = score_variants(tiny_engine, sequence, variants, "joint-masked")
    # The 20 single-position passes are the masked-marginals ones above, read from the result
    # store: only the multi-mutant's joint row runs.
    assert masked.masked_rows == 0 and forward.masked_rows == 1 and forward.masks_per_row == [2]
    assert joint.passes == 21
    # Singles: the joint pass is the masked-marginal pass, so nothing is added.
    assert (joint.table.non_additivity[:20] == 0).all()
    np.testing.assert_allclose(joint.table.score[:20], result.table.score[:20])


def test_long_sequences_follow_the_window_rule_and_say_so(hf_checkpoints):
    directory, hf = hf_checkpoints(TINY, "5x")
    engine = Engine(load_weights(str(directory)))
    rng = np.random.default_rng(8)
    sequence = "".join(rng.choice(list(AAS), size=1400))
    near, far = (600, 900), (10, 1300)  # 0-based; the second pair is 1,291 residues apart
    sequence = "".join("Y" if i in near + far and aa == "W" else aa for i, aa in enumerate(sequence))
    text = " ".join(f"{sequence[a]}{a + 1}W:{sequence[b]}{b + 1}W" for a, b in (near, far))
    variants, _ = parse_mutations(text, sequence)
    assert len(variants) == 2
    result = score_variants(engine, sequence, variants, "joint-masked", record_id="long")
    assert any("1,400 residues is longer than ESM-2's training length" in note for note in result.notes)
    assert result.table.status[0] == "ok"
    assert np.isnan(result.table.score[1]) and "more than one 1,022-residue window" in result.table.status[1]
    # Reference: HF on ProteinGym's 1,024-token window of the middle of the pair's span (tokens:
    # residue p is token p + 1; interior windows hold no <cls>/<eos>), shifted to hold the pair.
    tokens = batch_encode([sequence])[0]
    middle = (near[0] + near[1]) // 2 + 1
    start, end = proteingym_get_optimal_window(middle, len(tokens), 1024)
    assert start <= near[0] + 1 and near[1] + 1 < end
    row = tokens[start:end].copy()
    row[[near[0] + 1 - start, near[1] + 1 - start]] = MASK_IDX
    at = torch.log_softmax(hf_forward(hf, row[None]).logits.double(), -1).numpy()[0]
    ref = sum(at[p + 1 - start, esm_index("W")] - at[p + 1 - start, esm_index(sequence[p])] for p in near)
    assert abs(result.table.score[0] - ref) < ATOL
    # Additive under masked-marginals: each position in ProteinGym's window of it.
    additive = score_variants(engine, sequence, variants[:1], "masked-marginals")
    lp = proteingym_masked_log_probs(hf, sequence, list(near))
    ref_additive = sum(lp[k, esm_index("W")] - lp[k, esm_index(sequence[p])] for k, p in enumerate(near))
    assert abs(additive.table.score[0] - ref_additive) < ATOL


def test_skipped_entries_keep_their_place_and_columns_are_as_specified(tiny_engine):
    sequence = "MKVLAGHEWYPQRSTDCINF"
    variants, issues = parse_mutations("K2A nonsense V3D:L4P W9* K2A", sequence)
    calls = []
    result = score_variants(tiny_engine, sequence, variants, "joint-masked", issues=issues, record_id="r1",
                            progress=lambda done, total: calls.append((done, total)))
    table = result.table
    assert list(table.mutant) == ["K2A", "nonsense", "V3D:L4P", "W9*", "K2A"]
    assert list(table.status[[0, 2, 4]]) == ["ok"] * 3 and (table.record_id == "r1").all()
    assert "'nonsense' is not a protein substitution" in table.status[1] and "stop" in table.status[3]
    assert table.score[[1, 3]].isna().all() and table.score[[0, 2, 4]].notna().all()
    assert table.score[0] == table.score[4]
    assert result.n_scored == 3 and result.n_skipped == 2
    assert output_columns("joint-masked") == ["record_id", "mutant", "score", "non_additivity", "status"]
    assert output_columns("masked-marginals") == ["record_id", "mutant", "score", "status"]
    assert set(output_columns("joint-masked")) <= set(table.columns)
    assert "non_additivity" not in score_variants(tiny_engine, sequence, variants, "wt-marginals").table
    assert calls and calls[-1] == (result.passes, result.passes) == (4, 4)
    assert all(d2 >= d1 for (d1, _), (d2, _) in zip(calls, calls[1:]))
    assert any("random weights" in note for note in result.notes)


def test_nothing_to_score_and_unknown_strategy(tiny_engine):
    _, issues = parse_mutations("E7*", "MKVLAGHEWY")
    result = score_variants(tiny_engine, "MKVLAGHEWY", [], issues=issues)
    assert result.n_scored == 0 and result.passes == 0 and len(result.table) == 1
    with pytest.raises(ValueError, match="masked-marginals, wt-marginals, joint-masked, pll"):
        score_variants(tiny_engine, "MKV", [], "pppl")


def test_pll_size_limit():
    assert pll_passes(300, 5) == 1800
    assert pll_size_problem(300, 5) is None
    message = pll_size_problem(300, 10)
    assert "3,300 masked passes" in message and f"{PLL_HOSTED_MAX_PASSES:,}" in message and "masked-marginals" in message
