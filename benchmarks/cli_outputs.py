"""Run a fixed list of flamino CLI commands of one checkout and hash every output, to compare two checkouts.

What it is for: a refactor (#49's architecture round: runtime/ -> engine/, predict/ -> predictors/, the batch
entry folded into `flamino batch`, ...) must not change any output. This runs the same commands with the same
real inputs (/work/shared) and the untrained `random:tiny` model against a checkout's own code, writes every
output file and each command's stdout/stderr into OUT, and a manifest (sha256 per file). `compare` says, file
by file, identical or different (a short unified diff for text). A script, not a test: it takes minutes.

    git worktree add --detach /tmp/cli_base 93487c8; git worktree add --detach /tmp/cli_head main
    PY=/work/main/.venv/bin/python
    $PY benchmarks/cli_outputs.py run /tmp/cli_base /tmp/out_base [--kernel SO] [--no-batch]
    $PY benchmarks/cli_outputs.py run /tmp/cli_head /tmp/out_head [--kernel SO] [--no-batch]
    $PY benchmarks/cli_outputs.py compare /tmp/out_base /tmp/out_head

Each command runs as `<python> -m flamino_core.cli ...` with cwd = the checkout and PYTHONPATH = the checkout
(its own python files are imported, not the venv's editable install), HF_HUB_OFFLINE=1 and a fresh
FLAMINO_CACHE per run (results are computed, not read back from an earlier run's store; within a run, a later
command reads what an earlier one stored, in the same order at both commits). The fused C++ kernel is a compiled
file that a fresh worktree lacks: --kernel copies a built _attention_cpu*.so into the checkout's
flamino_core/model/ (each log's `-v` line says which attention path ran).
"""

import argparse
import contextlib
import difflib
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SHARED = Path(os.environ.get("FLAMINO_SHARED", "/work/shared"))
DMS = SHARED / "dms" / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"
STRUCTURE, CHAIN = SHARED / "structures" / "1A7G.cif", "E"
MODEL = "random:tiny"
MUTATIONS = "E6V, K8A, E6V:K8A, p.Glu6del, p.Val1_His2insGly, p.Lys8Ter"  # HBB_HUMAN.fa has no Met1
PLL_MUTATIONS = "E6V, E6V:K8A, p.Glu6del, p.Val1_His2insGly, p.Lys8Ter"


def commands(i: Path, o: Path) -> list[tuple[str, list[str]]]:
    """(name, CLI arguments): the fixed list. Inputs under i, outputs under o."""
    m, fa, hbb, dms, fit = ["-m", MODEL, "-v"], i / "proteins.fa", i / "hbb.fa", i / "dms60.csv", o / "fit_model"
    return [
        ("embed", ["embed", fa, *m, "-o", o / "embed.npz", "--include", "mean,per_tok,logits,attentions,contacts",
                   "--repr-layers", "0", "1", "-1"]),
        *[(f"score_{s}", ["score", fa, *m, "-o", o / f"score_{s}.csv", "--strategy", s])
          for s in ("masked-marginals", "wt-marginals", "pppl")],
        ("variants_masked-marginals", ["variants", hbb, *m, "--mutations", MUTATIONS, "-o", o / "variants_mm.csv"]),
        ("variants_pll", ["variants", hbb, *m, "--mutations", PLL_MUTATIONS, "--strategy", "pll",
                          "-o", o / "variants_pll.csv"]),
        *[(f"dms_{s}", ["dms", dms, *m, "--strategy", s, "-o", o / f"dms_{s}.csv", "--metrics", o / f"dms_{s}.json"])
          for s in ("masked-marginals", "wt-marginals")],
        ("contacts", ["contacts", i / "1a7g.fa", *m, "--structure", STRUCTURE, "-o", o / "contacts.csv",
                      "--track", "entropy", "--pdb-out", o / "contacts_entropy.pdb"]),
        ("contacts_pca", ["contacts", i / "1a7g.fa", *m, "--structure", STRUCTURE, "-o", o / "contacts_pca.csv",
                          "--track", "pca", "--pdb-out", o / "contacts_pca.pdb"]),
        ("suggest", ["suggest", i / "1a7g.fa", *m, "--top", "5", "--combine", "3", "--avoid", "C,P",
                     "--strategies", "masked-marginals,wt-marginals,pll", "-o", o / "suggest.csv"]),
        ("fit", ["fit", dms, *m, "--target", "DMS_score", "-o", o / "fit.csv", "--metrics", o / "fit.json",
                 "--save-model", fit]),
        ("predict_table", ["predict", fit, i / "dms_next.csv", *m, "-o", o / "predict_table.csv"]),
        ("predict_singles", ["predict", fit, i / "dms_wt.fa", "--singles", *m, "-o", o / "predict_singles.csv"]),
        ("suggest_predictor", ["suggest", i / "dms_wt.fa", *m, "--top", "5", "--strategies", "wt-marginals",
                               "--predictor", fit, "-o", o / "suggest_predictor.csv"]),
        ("fold", ["fold", i / "short.fa", "-m", "random:esmfold-tiny", "-o", o / "fold"]),
        ("fold2", ["fold", i / "short.fa", "-m", "random:esmfold2-tiny", "-o", o / "fold2"]),
    ]


BATCH = ("batch_embed", ["batch", "embed", "INPUTS/proteins.fa", "-m", MODEL, "-o", "FILES/batch_embed",
                         "--shard-size", "2", "--actors", "1", "--include", "mean,per_tok"])


def write_inputs(i: Path) -> None:
    """Small real inputs: HBB and UniProt proteins, 1A7G's chain E, the first 60 rows of a ProteinGym DMS."""
    i.mkdir(parents=True)
    (i / "hbb.fa").write_text((SHARED / "fasta" / "HBB_HUMAN.fa").read_text())
    (i / "proteins.fa").write_text((SHARED / "fasta" / "HBB_HUMAN.fa").read_text()
                                   + (SHARED / "fasta" / "uniprot_two.fa").read_text())
    from Bio.PDB import MMCIFParser  # the structure's chain as FASTA (the CLI refuses a structure as FASTA)
    from Bio.SeqUtils import seq1
    chain = MMCIFParser(QUIET=True).get_structure("s", str(STRUCTURE))[0][CHAIN]
    (i / "1a7g.fa").write_text(">1A7G_E\n" + "".join(seq1(r.get_resname()) for r in chain if r.id[0] == " ") + "\n")
    (i / "short.fa").write_text(">short\nMKTAYIAKQRQISFVKSHFSRQ\n")  # folded by the untrained test models
    rows = DMS.read_text().splitlines()
    (i / "dms60.csv").write_text("\n".join(rows[:61]) + "\n")
    (i / "dms_next.csv").write_text("\n".join(rows[:1] + rows[61:81]) + "\n")
    mutant, mutated = rows[1].split(",")[:2]  # the wild type: undo the first row's substitution
    pos = int(mutant[1:-1])
    (i / "dms_wt.fa").write_text(f">A0A1I9GEU1\n{mutated[:pos - 1]}{mutant[0]}{mutated[pos:]}\n")


def normalise(text: str, paths: dict[str, str]) -> str:
    """A log as comparable text: only what differs between two runs of the same code is replaced."""
    for path, name in paths.items():  # temp dirs, the checkout, the cache: each run has its own
        text = text.replace(path, name)
    # progress lines are redrawn with carriage returns as time passes: keep each line's last state
    text = "\n".join(line.split("\r")[-1] for line in text.split("\n"))
    # wall-clock dates (a run's start, a store's timestamp) differ by when the command ran
    text = re.sub(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?", "<DATE>", text)
    # timings, rates and time-left estimates depend on the machine's load, not on the code
    text = re.sub(r"\b\d+(\.\d+)?\s?(ms|s|sec|seconds?|min|minutes?|h|it/s|s/it|residues/s|tokens/s)\b", "<T>", text)
    text = re.sub(r"\b\d+:\d\d(:\d\d)?\b", "<T>", text)  # 0:12 / 1:02:03 style clocks
    text = re.sub(r"\b\d+m\d+s\b", "<T>", text)  # 1m38s (progress.duration past a minute)
    # a fold's length limit on a CPU is read from the host's free memory at that moment
    text = re.sub(r"length limit: [\d,]+ residues on this device \(the memory estimate in the host's [\d.]+ GiB",
                  "length limit: <N> residues on this device (the memory estimate in the host's <MEM>", text)
    # Ray's own C++ log lines ([date,ms E pid tid] file.cc:N: ...) carry process and actor ids of that run
    text = re.sub(r"(?m)^\[<DATE>,\d+ [DIWEF] \d+ \d+\] \S+\.cc:\d+:.*\n", "", text)
    return text


def canonical(path: Path, paths: dict[str, str]) -> str | None:
    """A comparable text for outputs whose raw bytes differ between two runs of the same code, else None."""
    if path.suffix == ".npz":  # the zip's member dates change with every write: compare the arrays
        with np.load(path, allow_pickle=False) as npz:
            return "".join(f"{k} {npz[k].dtype} {npz[k].shape} {hashlib.sha256(npz[k].tobytes()).hexdigest()}\n"
                           for k in sorted(npz.files))
    if path.suffix == ".parquet":  # its `file` column holds the input's temp path: rows with paths replaced
        import pyarrow.parquet as pq
        table = pq.read_table(path)
        cols = [f"{n} {hashlib.sha256(normalise(json.dumps(table[n].to_pylist()), paths).encode()).hexdigest()}"
                for n in table.column_names]
        return f"{table.schema}\nrows {table.num_rows}\n" + "\n".join(cols) + "\n"
    if path.name == "manifest.json":  # batch's manifest, beside its results
        text = normalise(path.read_text(), paths)  # the inputs' temp paths, its creation and finish dates
        text = re.sub(r'"mtime_ns": \d+', '"mtime_ns": <MTIME>', text)  # the inputs are written afresh each run
        # the job's key hashes its identity, which holds the inputs' absolute (temp) paths
        text = re.sub(r'"key": "[0-9a-f]{64}"', '"key": <KEY>', text)
        text = re.sub(r'"[0-9a-f]{56}"', "<RAY NODE ID>", text)  # Ray's node id of that run
        return re.sub(r'"(seconds|cpu_seconds|residues_per_s)": [0-9.e+-]+', r'"\1": <T>', text)  # timings
    return None


def run_one(name: str, args: list, ctx: dict) -> float:
    """One CLI command of the checkout; its normalised stdout/stderr and exit code into logs/."""
    argv = [ctx["python"], "-m", "flamino_core.cli", *[str(a) for a in args]]
    start = time.monotonic()
    done = subprocess.run(argv, cwd=ctx["checkout"], env=ctx["env"], capture_output=True, text=True)
    took = time.monotonic() - start
    logs = ctx["out"] / "logs"
    for stream, text in (("stdout", done.stdout), ("stderr", done.stderr)):
        (logs / f"{name}.{stream}").write_text(normalise(text, ctx["paths"]) + f"[exit {done.returncode}]\n")
    print(f"{name}: exit {done.returncode}, {took:.1f} s", flush=True)
    return took


def run(checkout: Path, out: Path, python: str, kernel: str | None, batch: bool) -> None:
    if out.exists():
        sys.exit(f"{out} exists: give a new output folder")
    if kernel:  # the compiled kernel is not in git: a fresh worktree runs pure JAX without it
        shutil.copy2(kernel, checkout / "flamino_core" / "model" / Path(kernel).name)
    cache = Path(tempfile.mkdtemp(prefix="flamino_cache_"))
    i, files = out / "inputs", out / "files"
    write_inputs(i)
    files.mkdir()
    (out / "logs").mkdir()
    env = {**os.environ, "PYTHONPATH": str(checkout), "HF_HUB_OFFLINE": "1", "FLAMINO_CACHE": str(cache),
           "COLUMNS": "120", "PYTHONHASHSEED": "0"}
    paths = {str(files): "<OUT>", str(i): "<IN>", str(cache): "<CACHE>", str(checkout): "<CHECKOUT>"}
    ctx = {"python": python, "checkout": checkout, "env": env, "out": out, "paths": paths}
    total = sum(run_one(name, args, ctx) for name, args in commands(i, files))
    if batch:
        name, args = BATCH
        args = [a.replace("INPUTS", str(i)).replace("FILES", str(files)) for a in args]
        total += run_one(name, args, ctx)
    shutil.rmtree(cache, ignore_errors=True)
    write_manifest(out, paths)
    print(f"{checkout}: {total:.0f} s of commands; manifest {out / 'manifest.json'}")


def write_manifest(out: Path, paths: dict[str, str]) -> None:
    """sha256 of every output and log; one with a canonical text (written beside it as .canonical) by that."""
    manifest = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        rel = path.relative_to(out).as_posix()
        if rel.startswith("inputs/") or rel == "manifest.json":
            continue
        text = canonical(path, paths)
        if text is not None:
            path, rel = path.with_name(path.name + ".canonical"), rel + ".canonical"
            path.write_text(text)
        manifest[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def compare_manifests(a: Path, b: Path, unit: str, describe) -> int:
    """identical / different / missing per entry of two runs' manifests (also used by
    figure_outputs.py); ``describe(name)`` says how an entry that differs differs. 0: all identical."""
    ma, mb = (json.loads((d / "manifest.json").read_text()) for d in (a, b))
    names = sorted(set(ma) | set(mb))
    same = 0
    for name in names:
        if name not in ma or name not in mb:
            print(f"missing   {name} (only in {a if name in ma else b})")
        elif ma[name] == mb[name]:
            same += 1
            print(f"identical {name}")
        else:
            print(f"different {name}{describe(name)}")
    print(f"\n{same} of {len(names)} {unit} identical")
    return 0 if same == len(names) else 1


def compare(a: Path, b: Path, lines: int) -> int:
    """Per file; a unified diff's head for text that differs."""
    def describe(rel: str) -> str:
        diff = io.StringIO()
        with contextlib.redirect_stdout(diff):  # printed under its "different" line
            print_diff(a / rel, b / rel, lines)
        return "\n" + diff.getvalue().rstrip("\n") if diff.getvalue() else ""

    return compare_manifests(a, b, "files", describe)


def print_diff(a: Path, b: Path, lines: int) -> None:
    try:
        ta, tb = a.read_text().splitlines(), b.read_text().splitlines()
    except UnicodeDecodeError:
        print("    (binary)")
        return
    diff = list(difflib.unified_diff(ta, tb, str(a), str(b), lineterm="", n=1))
    out = io.StringIO()
    for line in diff[:lines]:
        out.write(f"    {line[:200]}\n")
    if len(diff) > lines:
        out.write(f"    ... {len(diff) - lines} more diff lines\n")
    print(out.getvalue(), end="")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("run", help="run the commands of CHECKOUT into OUT (a new folder)")
    r.add_argument("checkout", type=Path)
    r.add_argument("out", type=Path)
    r.add_argument("--python", default=sys.executable, help="interpreter (default: this one)")
    r.add_argument("--kernel", help="a built _attention_cpu*.so to copy into the checkout first")
    r.add_argument("--no-batch", dest="batch", action="store_false", help="skip `flamino batch embed` (Ray)")
    c = sub.add_parser("compare", help="compare two run folders' manifests")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    c.add_argument("--lines", type=int, default=20, help="diff lines shown per differing text file")
    args = parser.parse_args()
    if args.mode == "compare":
        return compare(args.a, args.b, args.lines)
    run(args.checkout.resolve(), args.out.resolve(), args.python, args.kernel, args.batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
