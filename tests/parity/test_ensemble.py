"""The ESM-1v ensemble as one model choice, on the real ProteinGym assay in ../shared/dms.

Five small random ESM-1v members (transformers' EsmForMaskedLM with learned positions, each
saved by save_pretrained under a name with "esm1v" in it; the published members are 650M and
cannot reach this machine): ``flamino dms -m ensemble:<five folders>`` writes each member's
score and their mean. Each member's column equals its own masked-marginal scores computed from
transformers' log-probabilities at the masked positions (1e-4, test_parity.py's bound), and
``score`` is their mean; every pass goes through the result store keyed per member.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from flamino_core.alphabet import MASK_IDX, TOKEN_TO_IDX, batch_encode
from flamino_core.model.families import ENSEMBLES, ensemble_members
from conftest import checkpoint_seed
from family_checkpoints import esm1b_config, make_hf_esm1b
from reference_checkpoints import hf_forward

ASSAY = "A0A1I9GEU1_NEIME_Kennouche_2019"
MEMBER = esm1b_config("esm1v")


@pytest.fixture(scope="module")
def members(tmp_path_factory):
    root = tmp_path_factory.mktemp("esm1v-members")
    made = []
    for i in range(1, 6):
        hf = make_hf_esm1b(MEMBER, checkpoint_seed("esm1v", str(i)))
        hf.save_pretrained(root / f"esm1v_tiny_{i}")
        made.append((root / f"esm1v_tiny_{i}", hf))
    return made


def hf_masked_marginals(hf, wild_type: str, mutants: pd.Series) -> np.ndarray:
    """sum over a mutant's substitutions of log p(mt) - log p(wt), p from transformers with that
    position masked in the wild type (Meier et al.'s masked-marginals)."""
    positions = sorted({int(s[1:-1]) for m in mutants for s in m.split(":")})
    tokens = np.repeat(batch_encode([wild_type]), len(positions), axis=0)
    tokens[np.arange(len(positions)), positions] = MASK_IDX  # residue i (1-based) is token i
    log_probs = torch.log_softmax(hf_forward(hf, tokens).logits, -1).numpy()
    at = {p: log_probs[row, p] for row, p in enumerate(positions)}
    return np.array([sum(at[int(s[1:-1])][TOKEN_TO_IDX[s[-1]]] - at[int(s[1:-1])][TOKEN_TO_IDX[s[0]]]
                         for s in m.split(":")) for m in mutants])


def test_the_ensemble_score_is_the_mean_of_its_members_each_equal_to_transformers(members, tmp_path, shared_fasta):
    from flamino_core import Engine, load_weights
    from flamino_core.cli import main
    from flamino_core.store.result_store import default_store

    dms = shared_fasta.parent / "dms" / f"{ASSAY}.csv"
    out = tmp_path / "scores.csv"
    identifier = "ensemble:" + ",".join(str(path) for path, _ in members)
    assert main(["dms", str(dms), "-m", identifier, "-o", str(out), "--metrics", str(tmp_path / "m.json")]) == 0
    frame = pd.read_csv(out)
    columns = [f"score_esm1v_tiny_{i}" for i in range(1, 6)]
    assert list(frame.columns[-7:]) == [*columns, "score", "status"]
    scored = frame["status"] == "ok"
    assert scored.sum() == len(frame) == 922
    wild_type = (shared_fasta.parent / "dms" / f"{ASSAY}.wt.fa").read_text().split("\n", 1)[1].replace("\n", "")
    # Every member's masked passes are in the result store, each under that member's fingerprint.
    fingerprints = {Engine(load_weights(str(path))).fingerprint for path, _ in members}
    assert len(fingerprints) == 5
    for fingerprint in fingerprints:
        assert default_store().held_positions(fingerprint, wild_type) == set(range(len(wild_type)))
    for (path, hf), column in zip(members, columns):
        reference = hf_masked_marginals(hf, wild_type, frame["mutant"])
        # 1e-4: test_parity.py's bound; a sum of two log-probabilities per substitution.
        np.testing.assert_allclose(frame[column], reference, atol=1e-4, rtol=5e-6, err_msg=column)  # + %.6g
    # The CSV holds 6 significant digits (%.6g): each value is off by up to 5e-6 of itself.
    rounding = 5e-6 * (frame[columns].abs().max(axis=1) + frame["score"].abs())
    assert (np.abs(frame["score"] - frame[columns].mean(axis=1)) <= rounding).all()
    assert frame[columns].std(axis=1).min() > 0.01  # the members differ: a mean of equal columns proves nothing


def test_the_published_ensemble_is_five_members():
    assert ensemble_members("esm1v_ensemble") == tuple(f"esm1v_t33_650M_UR90S_{i}" for i in range(1, 6))
    assert ENSEMBLES["esm1v_ensemble"].family == "esm1v"
    with pytest.raises(ValueError, match="two models or more"):
        ensemble_members("ensemble:only_one")


def test_flamino_variants_with_an_ensemble_writes_each_member_and_their_mean(members, tmp_path, shared_fasta):
    """A mutation list under two of the members: each member's column is what ``flamino variants
    -m <member>`` writes alone, ``score`` their mean, the columns in order."""
    from flamino_core.cli import main

    from flamino_core.inputs.fasta import read_fasta

    fasta = shared_fasta / "HBB_HUMAN.fa"
    sequence = read_fasta(fasta).records[0].sequence
    mutations = ", ".join(f"{sequence[i]}{i + 1}{'A' if sequence[i] != 'A' else 'G'}" for i in (1, 6, 20))
    two = [str(path) for path, _ in members[:2]]
    alone = []
    for i, member in enumerate(two):
        out = tmp_path / f"alone{i}.csv"
        assert main(["variants", str(fasta), "--mutations", mutations, "-m", member, "-o", str(out)]) == 0
        alone.append(pd.read_csv(out))
    out = tmp_path / "ensemble.csv"
    assert main(["variants", str(fasta), "--mutations", mutations, "-m", "ensemble:" + ",".join(two),
                 "-o", str(out)]) == 0
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["record_id", "mutant", "score_esm1v_tiny_1", "score_esm1v_tiny_2", "score", "status"]
    assert (frame["status"] == "ok").all()
    np.testing.assert_array_equal(frame["score_esm1v_tiny_1"], alone[0]["score"])
    np.testing.assert_array_equal(frame["score_esm1v_tiny_2"], alone[1]["score"])
    rounding = 5e-6 * (frame[["score_esm1v_tiny_1", "score_esm1v_tiny_2"]].abs().max(axis=1) + frame["score"].abs())
    assert (np.abs(frame["score"] - (alone[0]["score"] + alone[1]["score"]) / 2) <= rounding).all()
