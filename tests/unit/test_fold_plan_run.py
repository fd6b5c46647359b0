"""The plan of a many-record fold before any work (issue #64 items 4-5, #65 item 3): the device's
length limit from the memory estimate (a 1,500-residue record accepted where the memory holds it,
refused where it does not, by the core's one rule), buckets and fold order, the long-chain note,
and the resume journal's reading. Nothing is folded (the model's shape is read abstractly)."""

from __future__ import annotations

import dataclasses
import json

from flamino_core.model.esmfold.config import FoldConfig
from flamino_core.structure.folding import fold_run, prediction


@dataclasses.dataclass
class Record:
    id: str
    sequence: str


def test_the_device_limit_is_the_longest_bucket_the_memory_estimate_holds():
    tiny = FoldConfig.tiny()
    room = prediction.fold_memory(tiny, 1500).total  # exactly what a 1,500-residue fold needs (padded to 1,536)
    assert prediction.device_fold_limit(tiny, room) == 1536
    assert prediction.device_fold_limit(tiny, room - 1) == 1472  # one byte short: the bucket below
    longest, where = prediction.fold_length_limit(tiny, room, "the host's 1 GiB available")
    assert longest == 1536 and "the host's 1 GiB available" in where
    assert prediction.length_refusal(1500, False, longest=longest, where=where) is None
    assert "1,536 at most on this device" in prediction.length_refusal(1537, False, longest=longest, where=where)
    # Without a device's figures the limit is the stem's trained length, as the app's.
    assert prediction.fold_length_limit(tiny, None, "")[0] == prediction.TRAINED_RESIDUES
    assert "1,022 at most in one pass" in prediction.length_refusal(1500, False)


def test_a_device_the_estimate_finds_short_keeps_the_trained_length_and_says_so():
    """esmfold_v1 in fp32 on a 16 GiB chip: the estimate holds fewer than 1,022 residues (its
    weights are 13.1 GiB); the limit stays 1,022 (what folded before still does) and says it."""
    v1 = FoldConfig.esmfold_v1()
    chip = int(15.75 * 2**30)
    fits = prediction.device_fold_limit(v1, chip, platform="tpu")
    assert 64 < fits < prediction.TRAINED_RESIDUES
    assert prediction.device_fold_limit(v1, chip, stem_precision="bf16", platform="tpu") > fits  # half the stem
    longest, where = prediction.fold_length_limit(v1, chip, "the chip's 15.8 GiB free", platform="tpu")
    assert longest == prediction.TRAINED_RESIDUES and f"hold {fits:,}" in where


def test_the_plan_orders_by_bucket_refuses_by_the_rule_and_flags_long_chains(tmp_path):
    records = [Record("long", "A" * 1500), Record("a", "M" * 70), Record("b", "M" * 10), Record("huge", "A" * 1600),
               Record("a", "K" * 20)]
    plan = fold_run.plan_run(records, tmp_path, FoldConfig.tiny(), "key", 1536, "on this device", 64, "fp32", None,
                             platform="cpu")
    assert [(t.name, t.file, t.bucket) for t in plan.todo] == [
        ("b", "b.pdb", 64), ("a", "a_2.pdb", 64), ("a", "a.pdb", 128), ("long", "long.pdb", 1536)]
    assert [t.past_trained for t in plan.todo] == [False, False, False, True]
    assert plan.refused == (("huge", "1,600 residues: 1,536 at most on this device (the pair state grows as the "
                                     "length squared)"),)
    said = "\n".join(plan.lines())
    assert ("4 record(s) to fold (10-1,500 residues) in 3 length bucket(s) of 64: <= 64 (2), <= 128 (1), "
            "<= 1,536 (1)") in said
    assert "length limit: 1,536 residues on this device" in said and "estimate: " in said
    assert "memory: about" in said and "for 1,500 residues" in said
    assert "1 record(s) over 1,022 residues, folded past the ESM-2 stem's trained length" in said
    # The estimate grows with the length: the 1,500-residue fold is most of it.
    assert plan.seconds[-1] > 10 * sum(plan.seconds[:-1])


def test_the_journal_keeps_finished_folds_of_this_model_whose_files_exist(tmp_path):
    records = [Record("a", "M" * 30), Record("b", "M" * 40), Record("c", "M" * 50)]
    first = fold_run.plan_run(records, tmp_path, FoldConfig.tiny(), "key", 1022, "", 64, "fp32", None, platform="cpu")
    a, b, c = sorted(first.todo, key=lambda t: t.index)
    lines = [json.dumps({"key": a.note_key("key"), "row": {"name": "a"}}),
             json.dumps({"key": b.note_key("other model"), "row": {"name": "b"}}),
             json.dumps({"key": c.note_key("key"), "row": {"name": "c"}}),
             '{"key": "cut sh']  # a line a kill cut short
    (tmp_path / fold_run.JOURNAL).write_text("\n".join(lines))
    (tmp_path / "a.pdb").write_text("whole")
    (tmp_path / "b.pdb").write_text("whole")  # c's file is missing: folded again
    plan = fold_run.plan_run(records, tmp_path, FoldConfig.tiny(), "key", 1022, "", 64, "fp32", None, platform="cpu")
    assert plan.done == {0: {"name": "a"}} and [t.name for t in plan.todo] == ["b", "c"]


def test_the_time_left_is_the_estimate_at_this_runs_pace_on_compiled_buckets():
    """Four folds of 1 s by the estimate in two buckets, 10-30 s to compile each: the first fold of
    a bucket (a compilation) leaves the pace alone; a warm fold of 2 s doubles it."""
    tasks = tuple(fold_run.FoldTask(i, f"r{i}", "M" * length, f"r{i}.pdb") for i, length in enumerate([10, 20, 70, 80]))
    plan = fold_run.FoldRunPlan(tasks, {}, (), 1022, "", (1.0, 1.0, 1.0, 1.0), (10.0, 30.0), "memory")
    clock = fold_run._TimeLeft(plan)
    assert clock.after(tasks[0], 1.0, 25.0, first_of_bucket=True) == 3 * 1.0 + 20  # 3 folds and one compilation
    assert clock.after(tasks[1], 1.0, 2.0, first_of_bucket=False) == 2 * 2.0 + 20  # at twice the estimate
    assert clock.after(tasks[2], 1.0, 30.0, first_of_bucket=True) == 1 * 2.0  # every bucket compiled
    # Without an estimate (ESMFold2): the mean fold so far, times the folds left.
    plain = fold_run._TimeLeft(dataclasses.replace(plan, seconds=(0.0,) * 4, compile=None, memory=""))
    assert plain.after(tasks[0], 0.0, 6.0, first_of_bucket=True) == 3 * 6.0
