"""``flamino batch``: streaming reader, shards, resumption after killed workers, parity with ``flamino embed``."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from flamino_core import batch

from flamino_core.variants import substitution_maps as scores
from flamino_core.batch import BatchError, Job, process_shard, read_records, read_results, run_batch, to_numpy
from flamino_core.cli import main as cli_main
from flamino_core.progress import duration
from flamino_core.engine.engine import Engine
from flamino_core.inputs.fasta import parse_fasta_text, read_fasta
from flamino_core.weights.loading import load_weights

AMINO = np.array(list("ACDEFGHIKLMNPQRSTVWY"))
TINY = "random:tiny"

# Every validator case the stream must treat as the whole-file validator does.
EDGE_CASES = """
>a first record
MKTAYIAKQR
QISFVKSHFS
>a duplicate id
mktay*
>
ACDEWY
>bad has a J and an inner stop
MKJ*K
>gapped
MK--LV..A
>empty
>b\twith a tab
MK 12 LV
>a
MKV
"""


@pytest.fixture(scope="module")
def engine():
    return Engine(load_weights(TINY))


def _proteome(path: Path, n: int, seed: int = 0) -> Path:
    """n records of 8..60 residues (every 120th over 1022, so windowed), one refused, one duplicate id.

    Few distinct lengths buckets keep compilation, most of the run time of the tiny model, short.
    """
    rng = np.random.default_rng(seed)
    with open(path, "w") as handle:
        for i in range(n):
            length = 1100 if i % 120 == 119 else int(rng.integers(8, 60))
            seq = "".join(rng.choice(AMINO, size=length))
            name = "p5" if i == 17 else f"p{i}"  # a second 'p5': renamed p5_2, like flamino embed does
            handle.write(f">{name} protein {i}\n")
            handle.writelines(seq[j:j + 60] + "\n" for j in range(0, length, 60))
            if i == 11:
                handle.write(">broken\nMKTJJ\n")
    return path


def _job(tmp_path: Path, **changes) -> Job:
    fields = dict(command="embed", out_dir=str(tmp_path / "out"), model=TINY, include=("mean", "per_tok"),
                  long="window", strategy=None, shard_size=4, token_budget=8192, key="test", files=("in.fa",))
    fields.update(changes)
    return Job(**fields)


# --- reading ---------------------------------------------------------------------------------
def test_stream_matches_whole_file_validator(tmp_path):
    path = tmp_path / "edge.fa"
    path.write_text(EDGE_CASES)
    streamed = list(read_records([path]))
    whole = parse_fasta_text(EDGE_CASES)
    kept = [r for r in streamed if r.error is None]
    assert [(r.id, r.description, r.sequence) for r in kept] == [
        (r.id, r.description, r.sequence) for r in whole.records
    ]
    assert [r.index for r in streamed] == list(range(8))
    refused = [r for r in streamed if r.error is not None]
    assert [r.id for r in refused] == ["bad", "empty"]
    for record in refused:
        messages = [issue.message for issue in whole.errors if issue.record == record.id]
        assert record.error == "; ".join(messages)
    assert "renamed this record 'a_2'" in streamed[1].warnings
    assert "named it 'record_3'" in streamed[2].warnings


def test_stream_reads_gzip_and_folders_with_ids_unique_over_all_files(tmp_path):
    folder = tmp_path / "proteome"
    folder.mkdir()
    (folder / "1.fa").write_text(">x\nMKV\n>y\nACD\n")
    with gzip.open(folder / "2.faa.gz", "wt") as handle:
        handle.write(">x\nWWW\n>z\nKKK\n")
    (folder / "notes.txt").write_text("not a FASTA file")
    files = batch.fasta_inputs([folder])
    assert [f.name for f in files] == ["1.fa", "2.faa.gz"]
    records = list(read_records(files))
    assert [(r.index, r.file, r.id, r.sequence) for r in records] == [
        (0, 0, "x", "MKV"), (1, 0, "y", "ACD"), (2, 1, "x_2", "WWW"), (3, 1, "z", "KKK"),
    ]
    with pytest.raises(BatchError, match="no such file"):
        batch.fasta_inputs([tmp_path / "missing.fa"])


def test_files_that_are_not_fasta_are_reported_not_read(tmp_path):
    genbank = tmp_path / "entry.gb"
    genbank.write_text("LOCUS       X 10 aa\nORIGIN\n")
    binary = tmp_path / "blob.fa"
    binary.write_bytes(b"\x00\x01\x02" * 10)
    issues: list[batch.FileIssue] = []
    assert list(read_records([genbank, binary], issues)) == []
    assert "GenBank" in issues[0].message and issues[0].file == 0
    assert "binary" in issues[1].message and issues[1].file == 1


def test_problems_with_a_whole_file_keep_the_validators_level(tmp_path):
    files = [tmp_path / "prose.fa", tmp_path / "latin1.fa", tmp_path / "headerless.fa"]
    files[0].write_text("My favourite proteins:\n>a\nMKV\n")
    files[1].write_bytes(b">caf\xe9 au lait\nMKV\n")
    files[2].write_text("MKVLAGG\n")
    issues: list[batch.FileIssue] = []
    assert [r.id for r in read_records(files, issues)] == ["a", "café"]
    assert [(i.file, i.level) for i in issues] == [(0, "warning"), (1, "warning"), (2, "error")]
    # The whole-file validator rates the first two the same (a paste without any header is one
    # bare sequence there; a batch file without one is refused).
    assert "ignored 1 line" in issues[0].message and parse_fasta_text(files[0].read_text()).errors == ()
    assert "Latin-1" in issues[1].message
    assert "sequence text before the first '>'" in issues[2].message


def test_shards_are_consecutive_records_in_input_order(tmp_path):
    fasta = _proteome(tmp_path / "in.fa", 30)
    job = _job(tmp_path, shard_size=7)
    records, residues, issues = batch.spool_shards(job, [fasta])
    assert records == [7, 7, 7, 7, 3] and not issues  # 31 records: 30 plus the refused one
    for k in range(len(records)):
        table = pq.read_table(batch.spool_path(job.out_dir, k))
        assert table.column("index").to_pylist() == list(range(7 * k, 7 * k + records[k]))
        assert residues[k] == sum(len(s or "") for s in table.column("sequence").to_pylist())


# --- one shard, no Ray ------------------------------------------------------------------------
def test_score_shard_matches_score_functions(tmp_path, engine):
    fasta = tmp_path / "in.fa"
    fasta.write_text(">s1\nMKTAYIAKQR\n>s2\nACDEFGHIK\n>s3\nWWYV\n")
    for strategy, column in (("pppl", "pppl"), ("masked-marginals", "scores"), ("wt-marginals", "scores")):
        job = _job(tmp_path / strategy, command="score", strategy=strategy, include=("mean",))
        batch.spool_shards(job, [fasta])
        info = process_shard(engine, job, 0)
        assert info["rows"] == 3 and info["failures"] == []
        table = pq.read_table(batch.shard_path(job.out_dir, 0))
        for row, seq in enumerate(["MKTAYIAKQR", "ACDEFGHIK", "WWYV"]):
            if strategy == "pppl":
                expected = scores.pseudo_perplexity(engine.compute_masked(seq), seq)
                assert table.column("pppl")[row].as_py() == pytest.approx(expected, rel=1e-6)
            else:
                expected = (scores.substitution_map(engine, seq, "masked-marginals").substitutions if strategy == "masked-marginals"
                            else scores.substitution_map(engine, seq, "wt-marginals").substitutions)
                np.testing.assert_allclose(to_numpy(table.column(column))[row], expected, atol=1e-5)
            np.testing.assert_allclose(to_numpy(table.column("mean"))[row], engine.run([seq])[0].mean, atol=1e-5)


@pytest.mark.parametrize("model, width", [("random:tiny-saprot", 33), ("random:tiny-esmc", 64)])
def test_logits_shard_of_each_family_holds_what_the_engine_returns(tmp_path, model, width):
    # SaProt's engine returns each amino acid's log-probability in the alphabet's 33 columns (not
    # its 446 tokens); ESM C its head's 64 logits. The shard's schema once asked SaProt for 446.
    fam_engine = Engine(load_weights(model))
    fasta = tmp_path / "in.fa"
    fasta.write_text(">s1\nMKTAYIAKQR\n>s2\nWWYV\n")
    job = _job(tmp_path, model=model, include=("mean", "logits"))
    batch.spool_shards(job, [fasta])
    info = process_shard(fam_engine, job, 0)
    assert info["rows"] == 2 and info["failures"] == []
    logits = pq.read_table(batch.shard_path(job.out_dir, 0)).column("logits").to_pylist()
    for row, seq in enumerate(["MKTAYIAKQR", "WWYV"]):
        expected = fam_engine.run([seq], logits=True)[0].logits
        assert expected.shape == (len(seq), width)
        # 1e-5: the bound docs/scale.md states for a row against `flamino embed` of the record alone
        # (the shard batches both records: fp32 rounding, 7e-7 measured); -inf columns equal.
        np.testing.assert_allclose(np.array(logits[row], np.float32), expected, rtol=0, atol=1e-5)


class _FailsOn:
    """An engine that raises on one sequence, as a model running out of memory would."""

    def __init__(self, engine, poison: str):
        self.engine, self.poison, self.config, self.family = engine, poison, engine.config, engine.family

    def run(self, sequences, **options):
        if self.poison in sequences:
            raise MemoryError("simulated out of memory")
        return self.engine.run(sequences, **options)


def test_a_record_the_model_fails_on_fails_alone(tmp_path, engine):
    fasta = tmp_path / "in.fa"
    fasta.write_text(">ok1\nMKTAYIAKQR\n>poison\nWWWWWWWWWW\n>ok2\nACDEFGHIK\n>refused\nMKJ\n")
    job = _job(tmp_path, shard_size=10)
    batch.spool_shards(job, [fasta])
    info = process_shard(_FailsOn(engine, "WWWWWWWWWW"), job, 0)
    table = pq.read_table(batch.shard_path(job.out_dir, 0))
    assert table.column("id").to_pylist() == ["ok1", "ok2"]
    np.testing.assert_allclose(to_numpy(table.column("per_tok"))[1], engine.run(["ACDEFGHIK"])[0].final, atol=1e-5)
    assert [(f["index"], f["id"]) for f in info["failures"]] == [(1, "poison"), (3, "refused")]
    assert "MemoryError" in info["failures"][0]["reason"]
    assert "'J' is not an amino-acid letter" in info["failures"][1]["reason"]
    assert batch.shard_info(batch.shard_path(job.out_dir, 0), job.key) == info  # the footer holds it
    assert batch.shard_info(batch.shard_path(job.out_dir, 0), "another job") is None


def test_a_record_in_flight_when_two_workers_died_is_failed_and_the_rest_computed(tmp_path, engine):
    fasta = tmp_path / "in.fa"
    fasta.write_text(">a\nMKTAYIAKQR\n>b\nWWWWWWWWWW\n>c\nACDEFGHIK\n")
    job = _job(tmp_path, shard_size=10)
    batch.spool_shards(job, [fasta])
    log = Path(job.out_dir) / batch.WORK_DIR / "attempts-00000.jsonl"
    # Two whole-shard attempts died, then two careful ones, each while computing record 1 (after 0).
    entries = [{"attempt": 1}, {"attempt": 2}, {"attempt": 3}, {"record": 0}, {"record": 1},
               {"attempt": 4}, {"record": 0}, {"record": 1}]
    log.write_text("".join(json.dumps(e) + "\n" for e in entries))
    info = process_shard(engine, job, 0)
    assert [f["id"] for f in info["failures"]] == ["b"]
    assert "died twice" in info["failures"][0]["reason"]
    assert pq.read_table(batch.shard_path(job.out_dir, 0)).column("id").to_pylist() == ["a", "c"]


def test_cpu_actors_claim_distinct_cores(tmp_path):
    # In a child process: pinning changes the affinity of the process that asks.
    code = f"""
import json, os
from flamino_core.jobs.ray_pool import pin_to_free_cores
everything = os.sched_getaffinity(0)
claims, pinned = [], []
while (held := pin_to_free_cores(1, {str(tmp_path)!r})) is not None:
    claims.append(held)
    pinned.append(sorted(os.sched_getaffinity(0)))
    os.sched_setaffinity(0, everything)
print(json.dumps([pinned, sorted(everything)]))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    pinned, everything = json.loads(result.stdout.strip().splitlines()[-1])
    assert pinned == [[core] for core in everything]  # one core each, every core once, then none left


# --- the command line ------------------------------------------------------------------------
def test_batch_command_line_refuses_bad_options_before_starting_ray(tmp_path, capsys):
    fasta = tmp_path / "in.fa"
    fasta.write_text(">a\nMKV\n")
    assert cli_main(["batch", "embed", str(fasta), "-m", TINY, "-o", str(tmp_path / "o"), "--include", "contacts"]) == 2
    assert "contacts not available" in capsys.readouterr().err
    assert cli_main(["batch", "score", str(fasta), "-m", TINY, "-o", str(tmp_path / "o"), "--include", "per_tok"]) == 2
    assert cli_main(["batch", "embed", str(tmp_path / "nope.fa"), "-m", TINY, "-o", str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert cli_main(["batch", "embed", str(fasta), "-m", "no-such-model", "-o", str(tmp_path / "o")]) == 2
    assert "unknown model" in capsys.readouterr().err


# --- on Ray ------------------------------------------------------------------------------------
def _map_workers(pid: int) -> list:
    import psutil

    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [p for p in children if _cmdline(p).startswith("ray::MapWorker")]


def _cmdline(process) -> str:
    try:
        return " ".join(process.cmdline())
    except Exception:
        return ""


def _wait_for(condition, timeout: float, proc) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def _finished_shards(out: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.glob("shard-*.parquet")}


def test_killed_worker_and_crashed_driver_then_rerun_match_single_process_embed(tmp_path):
    fasta = _proteome(tmp_path / "proteome.fa", 240)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "flamino_core.cli", "batch", "embed", str(fasta), "-m", TINY, "-o", str(out),
               "--shard-size", "8", "--include", "mean,per_tok"]
    n_shards = -(-241 // 8)
    with open(tmp_path / "first.log", "w") as log:
        first = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    leftovers = []
    try:
        _wait_for(lambda: len(_finished_shards(out)) >= 2 and _map_workers(first.pid), 180, first)
        victims = _map_workers(first.pid)
        assert victims, "no Ray worker found: " + (tmp_path / "first.log").read_text()[-2000:]
        done_at_kill = len(_finished_shards(out))
        victims[0].kill()  # SIGKILL, as the out-of-memory killer would
        assert done_at_kill < n_shards
        # The job goes on without that worker; then everything crashes. The workers are frozen
        # first (SIGSTOP), so the crash comes before the last shard however fast this machine is.
        _wait_for(lambda: len(_finished_shards(out)) >= done_at_kill + 3, 120, first)
        leftovers = _map_workers(first.pid)  # in their own sessions: not reached by killpg
        for process in leftovers:
            process.suspend()
        assert len(_finished_shards(out)) >= done_at_kill + 3, (tmp_path / "first.log").read_text()[-2000:]
        assert first.poll() is None, "the first run ended before the crash"
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        for process in leftovers:
            try:
                process.kill()
            except Exception:  # already gone with the driver
                pass
    kept = _finished_shards(out)
    assert len(kept) < n_shards

    rerun = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 2, rerun.stderr[-3000:]  # 2: one record was refused
    assert f"{len(kept)} of {n_shards} shards already done" in rerun.stderr
    after = _finished_shards(out)
    assert len(after) == n_shards
    assert {name: after[name] for name in kept} == kept  # finished shards were not recomputed

    # The single-process command on the same input, then row by row.
    assert cli_main(["embed", str(fasta), "-m", TINY, "-o", str(tmp_path / "ref.npz"),
                     "--include", "mean,per_tok"]) == 2
    ref = np.load(tmp_path / "ref.npz")
    table = read_results(out)
    assert table.column("id").to_pylist() == list(ref["ids"])
    assert table.column("index").to_pylist() == [i for i in range(241) if i != 12]  # no duplicate, none missing
    sequences = [r.sequence for r in read_fasta(fasta).records]
    assert table.column("length").to_pylist() == [len(s) for s in sequences]
    import hashlib
    assert table.column("seq_sha256").to_pylist() == [hashlib.sha256(s.encode()).hexdigest() for s in sequences]
    means, per_tok = to_numpy(table.column("mean")), to_numpy(table.column("per_tok"))
    for i in range(len(sequences)):
        np.testing.assert_allclose(means[i], ref[f"mean/{i}"], atol=1e-5)
        np.testing.assert_allclose(per_tok[i], ref[f"per_tok/{i}"], atol=1e-5)
    failures = [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()]
    assert [(f["index"], f["id"]) for f in failures] == [(12, "broken")]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] and manifest["summary"]["rows"] == 240
    assert not (out / batch.WORK_DIR).exists()


def test_score_job_in_process_over_two_files_then_a_different_job_is_refused(tmp_path, engine, ray_head,
                                                                               monkeypatch):
    """On the run's Ray head (joined: ``--ray-address``); starting Ray on this machine is what the
    killed-worker test above does, through the command."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # the head's setting (a loopback test cluster)
    first = tmp_path / "a.fa"
    first.write_text("".join(f">q{i}\n{'MKTAYIAKQRQISFVKSHFS'[: 5 + i]}\n" for i in range(12)))
    second = tmp_path / "b.fa.gz"
    with gzip.open(second, "wt") as handle:
        handle.write(">q0 same id as the first file's\nWWYVACDK\n>last\nKKKLLLPPP\n")
    out = tmp_path / "scores"
    summary = run_batch("score", [first, second], out, TINY, strategy="wt-marginals", include=("mean",),
                        shard_size=5, actors=2, ray_address=ray_head, say=lambda message: None)
    assert (summary.rows, summary.failures, summary.shards, summary.actors) == (14, 0, 3, 2)
    table = read_results(out)
    assert table.column("id").to_pylist()[-2:] == ["q0_2", "last"]
    assert table.column("file").to_pylist()[-1] == str(second)
    sequences = [r.sequence for r in read_fasta(first).records] + ["WWYVACDK", "KKKLLLPPP"]
    for row, seq in enumerate(sequences):
        np.testing.assert_allclose(to_numpy(table.column("scores"))[row], scores.substitution_map(engine, seq, "wt-marginals").substitutions, atol=1e-5)
        np.testing.assert_allclose(to_numpy(table.column("mean"))[row], engine.run([seq])[0].mean, atol=1e-5)
    with pytest.raises(BatchError, match=r"different job \(options"):
        run_batch("score", [first, second], out, TINY, strategy="pppl", shard_size=5, ray_address=ray_head,
                  say=lambda message: None)
    first.write_text(">changed\nMKV\n")
    with pytest.raises(BatchError, match="has changed since"):
        run_batch("score", [first, second], out, TINY, strategy="wt-marginals", shard_size=5, ray_address=ray_head,
                  say=lambda m: None)


def test_progress_reports_rate_and_eta(monkeypatch):
    import io

    clock = iter([0.0, 10.0, 20.0, 40.0, 50.0])
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    stream = io.StringIO()
    progress = batch.JobProgress(total_residues=4000, total_shards=4, stream=stream)
    for _ in range(4):  # at 10, 20, 40 and 50 s
        progress.update(rows=10, residues=1000)
    # Off a terminal: the first, then every 30 s, then the last; no ETA from the first shard alone.
    assert stream.getvalue().splitlines() == [
        "batch: 1/4 shards, 10 sequences, 100 residues/s, ETA ?",
        "batch: 3/4 shards, 30 sequences, 75 residues/s, ETA 13s",
        "batch: 4/4 shards, 40 sequences, 80 residues/s, ETA done",
    ]
    assert (duration(20), duration(95), duration(3725)) == ("20s", "1m35s", "1h02m")
