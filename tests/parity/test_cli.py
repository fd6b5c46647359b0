"""The flamino command on the real FASTA files, checked against the PyTorch reference."""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from flamino_core.alphabet import MASK_IDX, batch_encode
from flamino_core.cli import main
from flamino_core.inputs.fasta import read_fasta
from conftest import TINY
from reference_checkpoints import hf_forward


@pytest.fixture
def checkpoint(hf_checkpoints):
    return hf_checkpoints(TINY, "2022")


def test_embed_layout_and_values_match_hf(checkpoint, shared_fasta, tmp_path):
    directory, hf = checkpoint
    fasta = shared_fasta / "uniprot_two.fa"
    out = tmp_path / "out.npz"
    code = main(["embed", str(fasta), "-m", str(directory), "-o", str(out),
                 "--include", "mean,per_tok,logits,attentions,contacts", "--repr-layers", "0", "1", "-1"])
    assert code == 0
    data = np.load(out)
    records = read_fasta(fasta).records
    assert list(data["ids"]) == [r.id for r in records]
    assert list(data["sequences"]) == [r.sequence for r in records]
    for i, record in enumerate(records):
        L = len(record.sequence)
        with torch.no_grad():
            t = torch.as_tensor(batch_encode([record.sequence]), dtype=torch.long)
            ref = hf(input_ids=t, output_hidden_states=True, output_attentions=True)
            contacts = hf.esm.predict_contacts(t, torch.ones_like(t))[0].numpy()
        final = ref.hidden_states[-1][0, 1:-1].numpy()
        np.testing.assert_allclose(data[f"per_tok/{i}"], final, atol=1e-4)
        np.testing.assert_allclose(data[f"mean/{i}"], final.mean(0), atol=1e-4)
        np.testing.assert_allclose(data[f"logits/{i}"], ref.logits[0, 1:-1].numpy(), atol=1e-4, rtol=1e-5)
        np.testing.assert_allclose(data[f"layer0/{i}"], ref.hidden_states[0][0, 1:-1].numpy(), atol=1e-4)
        np.testing.assert_allclose(data[f"layer1/{i}"], ref.hidden_states[1][0, 1:-1].numpy(), atol=1e-4)
        assert data[f"attentions/{i}"].shape == (2, 4, L + 2, L + 2)
        np.testing.assert_allclose(data[f"attentions/{i}"], torch.stack(ref.attentions, 1)[0].numpy(), atol=1e-5)
        np.testing.assert_allclose(data[f"contacts/{i}"], contacts, atol=1e-5)
    assert "layer2/0" not in data  # the final layer is per_tok


def test_score_masked_marginals_csv_matches_hf(checkpoint, shared_fasta, tmp_path):
    directory, hf = checkpoint
    out = tmp_path / "scores.csv"
    assert main(["score", str(shared_fasta / "HBB_HUMAN.fa"), "-m", str(directory), "-o", str(out)]) == 0
    rows = list(csv.DictReader(open(out)))
    seq = read_fasta(shared_fasta / "HBB_HUMAN.fa").records[0].sequence
    assert len(rows) == 20 * len(seq)
    assert rows[0].keys() == {"record_id", "position", "wt", "mt", "score"}
    # Reference: HF with each position masked, scored independently with fair-esm's alphabet.
    import esm

    alphabet = esm.data.Alphabet.from_architecture("ESM-1b")
    tokens = np.repeat(batch_encode([seq]), len(seq), axis=0)
    tokens[np.arange(len(seq)), np.arange(len(seq)) + 1] = MASK_IDX
    lp = torch.log_softmax(hf_forward(hf, tokens).logits, -1).numpy()
    for row in rows[:: 37]:
        i = int(row["position"]) - 1
        assert row["wt"] == seq[i]
        ref = lp[i, i + 1, alphabet.get_idx(row["mt"])] - lp[i, i + 1, alphabet.get_idx(row["wt"])]
        assert abs(float(row["score"]) - ref) < 1e-4
        if row["mt"] == row["wt"]:
            assert float(row["score"]) == 0.0


def test_score_wt_marginals_and_pppl(checkpoint, shared_fasta, tmp_path):
    directory, hf = checkpoint
    fasta = shared_fasta / "uniprot_two.fa"
    records = read_fasta(fasta).records
    assert main(["score", str(fasta), "-m", str(directory), "-o", str(tmp_path / "wt.csv"),
                 "--strategy", "wt-marginals"]) == 0
    rows = list(csv.DictReader(open(tmp_path / "wt.csv")))
    assert len(rows) == 20 * sum(len(r.sequence) for r in records)
    assert main(["score", str(fasta), "-m", str(directory), "-o", str(tmp_path / "pppl.csv"),
                 "--strategy", "pppl"]) == 0
    pppl = list(csv.DictReader(open(tmp_path / "pppl.csv")))
    assert [r["record_id"] for r in pppl] == [r.id for r in records]
    assert all(float(r["pppl"]) >= 1.0 for r in pppl)  # exp of a mean negative log-probability


def test_invalid_inputs_exit_2_with_one_message(tmp_path, capsys):
    bad = tmp_path / "bad.fa"
    bad.write_text(">x\nMKJJ\n")
    assert main(["embed", str(bad), "-m", "random:tiny", "-o", str(tmp_path / "o.npz")]) == 2
    err = capsys.readouterr().err
    assert "x" in err and "J" in err and "Traceback" not in err
    assert main(["embed", str(tmp_path / "missing.fa"), "-m", "random:tiny", "-o", str(tmp_path / "o.npz")]) == 2
    good = tmp_path / "good.fa"
    good.write_text(">ok\nMKVL\n")
    assert main(["embed", str(good), "-m", "esm2_t99_bogus", "-o", str(tmp_path / "o.npz")]) == 2
    assert "unknown model" in capsys.readouterr().err
    assert main(["embed", str(good), "-m", "random:tiny", "-o", str(tmp_path / "o.txt")]) == 2
    assert main(["embed", str(good), "-m", "random:tiny", "-o", str(tmp_path / "o.npz"), "--include", "nope"]) == 2
    assert main(["score", str(good), "-m", "random:tiny", "-o", str(tmp_path / "o.csv"), "--strategy", "x"]) == 2
    assert main(["fetch", "esm2_t6_8M_UR50D"]) == 2  # offline, nothing cached
    assert "flamino fetch" in capsys.readouterr().err


def test_mixed_file_keeps_good_records_and_exits_2(tmp_path):
    mixed = tmp_path / "mixed.fa"
    mixed.write_text(">good1\nMKVLA\n>bad\nMK1J\n>good2\nACDEF\n")
    out = tmp_path / "o.npz"
    assert main(["embed", str(mixed), "-m", "random:tiny", "-o", str(out)]) == 2
    assert list(np.load(out)["ids"]) == ["good1", "good2"]


def test_console_script_runs_without_traceback(tmp_path, shared_fasta):
    env = dict(os.environ)
    exe = os.path.join(os.path.dirname(sys.executable), "flamino")
    ok = subprocess.run([exe, "embed", str(shared_fasta / "HBB_HUMAN.fa"), "-m", "random:tiny",
                         "-o", str(tmp_path / "o.npz")], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    assert "untrained test model" in ok.stderr
    bad = subprocess.run([exe, "embed", "/nonexistent.fa", "-o", str(tmp_path / "o.npz")],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stderr.strip()


# A handler the interpreter's teardown would run: it prints only if the process exits normally.
_RUN_WITH_TEARDOWN_MARK = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('teardown ran', file=sys.stderr))\n"
    "if sys.argv[1] == 'ray': sys.modules['ray'] = type(sys)('ray')  # as after flamino batch\n"
    "sys.argv = ['flamino', *sys.argv[2:]]\n"
    "from flamino_core.cli import run\n"
    "run()\n"
)


@pytest.mark.parametrize("ray", [False, True])
def test_command_ends_without_teardown_unless_it_ran_ray(tmp_path, ray):
    """``run`` (the console script) skips the interpreter's teardown (0.3-0.5 s of a short
    command) after everything is written, and keeps main's exit status; after Ray it exits
    normally so that Ray's exit handlers run."""
    mixed = tmp_path / "mixed.fa"
    mixed.write_text(">good1\nMKVLA\n>bad\nMK1J\n>good2\nACDEF\n")
    out = tmp_path / "o.npz"
    proc = subprocess.run([sys.executable, "-c", _RUN_WITH_TEARDOWN_MARK, "ray" if ray else "-",
                           "embed", str(mixed), "-m", "random:tiny", "-o", str(out)], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr  # a refused record, as main returns
    assert ("teardown ran" in proc.stderr) == ray, proc.stderr
    assert list(np.load(out)["ids"]) == ["good1", "good2"] and f"wrote {out}" in proc.stdout  # flushed, complete


def test_convert_then_use_checkpoint(checkpoint, tmp_path, shared_fasta):
    directory, _ = checkpoint
    out = tmp_path / "converted"
    assert main(["convert", str(directory), "-o", str(out)]) == 0
    assert (out / "flamino_config.json").exists()
    assert main(["embed", str(shared_fasta / "HBB_HUMAN.fa"), "-m", str(out), "-o", str(tmp_path / "a.npz")]) == 0
    assert main(["embed", str(shared_fasta / "HBB_HUMAN.fa"), "-m", str(directory), "-o", str(tmp_path / "b.npz")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "a.npz")["mean/0"], np.load(tmp_path / "b.npz")["mean/0"])


def test_embed_reads_three_letter_codes_as_residues_not_letters(shared_fasta, tmp_path, capsys):
    from Bio.SeqUtils import seq3

    hbb = read_fasta(shared_fasta / "HBB_HUMAN.fa").records[0].sequence
    three = seq3(hbb)
    fasta = tmp_path / "hbb3.fa"
    fasta.write_text(">HBB three-letter\n" + "-".join(three[i:i + 3] for i in range(0, len(three), 3)) + "\n")
    out = tmp_path / "out.npz"
    assert main(["embed", str(fasta), "-m", "random:tiny", "-o", str(out)]) == 0
    assert list(np.load(out)["sequences"]) == [hbb]  # not "METVALHIS..."
    assert "three-letter codes" in capsys.readouterr().err


def test_embed_contacts_of_a_long_sequence_are_nan_exactly_where_no_window_holds_the_pair(tmp_path, capsys):
    """Pairs that no 1022-residue window covers are *not predicted*: NaN in the NPZ, never 0."""
    length = 2300  # four windows: starts 0, 511, 1022 and 1278 (the last one flush right)
    rng = np.random.default_rng(7)
    sequence = "".join(rng.choice(list("ACDEFGHIKLMNPQRSTVWY"), length))
    fasta = tmp_path / "long.fa"
    fasta.write_text(f">long\n{sequence}\n")
    out = tmp_path / "contacts.npz"
    assert main(["embed", str(fasta), "-m", "random:tiny", "-o", str(out), "--include", "contacts"]) == 0
    assert "pairs no window holds are NaN (not predicted)" in capsys.readouterr().err
    contacts = np.load(out)["contacts/0"]
    # The window rule as the README states it, written out here: windows of 1022 residues
    # every 511, plus one ending at the last residue; a pair is predicted when one window holds both.
    starts = sorted(set(range(0, length - 1022, 511)) | {length - 1022})
    covered = np.zeros((length, length), bool)
    for start in starts:
        covered[start:start + 1022, start:start + 1022] = True
    assert contacts.shape == (length, length)
    np.testing.assert_array_equal(np.isnan(contacts), ~covered)
    assert (~covered).sum() > 0.2 * length**2  # a real share of the map is not predicted
    inside = contacts[covered]
    assert ((inside >= 0) & (inside <= 1)).all()  # sigmoid outputs where predicted
