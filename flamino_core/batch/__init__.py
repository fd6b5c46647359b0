"""``flamino batch``: embeddings and scores for whole proteomes on Ray, resumable.

A job runs in two stages.

1. *Read* (driver, one pass, streaming; ``inputs``): the FASTA files are read record by
   record through the one validator (``fasta.iter_records``), ids are made unique over the
   whole input, and the records are cut into shards of ``shard_size`` consecutive records.
   Shard k holds input records ``[k * shard_size, (k + 1) * shard_size)`` in input order,
   valid or not, so the cut never depends on the machine or the model. Each shard is
   spooled to ``OUT/.work/`` as a small Parquet file; only one shard is ever in memory.
2. *Compute* (Ray Data; ``ray_driver``): the pending shard numbers become a dataset whose
   ``map_batches`` runs on a pool of actors. Each actor loads the model once and turns a
   shard number into ``OUT/shard-XXXXX.parquet`` (``shards``): one row per valid record, in
   input order, written to a temporary name and renamed, so a shard file that exists is
   complete. The shard's failures travel in that file's footer, so rows and failures appear
   together or not at all.

A rerun with the same manifest (inputs, model, options, shard size; ``job``) skips every
complete shard; a rerun with different ones is refused unless ``overwrite``. Results depend
only on the record, never on its batch (see ``engine``), so which actor computed a shard and
how many actors there were does not change the numbers. ``run.run_batch`` runs a job;
``results`` reads one. The command line (``flamino batch``) is in ``cli``; errors are
``BatchError``, which it reports with exit status 2.
"""

from flamino_core.batch.inputs import FileIssue, InputRecord, fasta_inputs, read_records, spool_shards
from flamino_core.batch.job import FAILURES, MANIFEST, WORK_DIR, BatchError, Job, shard_path, spool_path
from flamino_core.batch.results import output_schema, read_results, shard_info, to_numpy
from flamino_core.batch.run import BatchSummary, JobProgress, run_batch
from flamino_core.batch.shards import process_shard

__all__ = [
    "FAILURES", "MANIFEST", "WORK_DIR", "BatchError", "BatchSummary", "FileIssue", "InputRecord", "Job",
    "JobProgress", "fasta_inputs", "output_schema", "process_shard", "read_records", "read_results",
    "run_batch", "shard_info", "shard_path", "spool_path", "spool_shards", "to_numpy",
]
