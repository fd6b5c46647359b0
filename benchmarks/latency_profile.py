"""Where one protein's forward pass spends its time on this CPU (issue #52, item 1).

The benchmark's latency job (``flamino_jobs.flamino_latency``: ``Engine.run([protein])``, logits
and the last hidden state, random weights of the shape) run warm under ``jax.profiler``; each
XLA operation the trace times is put in a class by what the optimised HLO says it computes (XLA
dumps the module: ``--xla_dump_to``), not by its name alone:

- ``dense GEMM``: a fusion or op whose HLO holds a ``dot`` (the attention projections, the MLP,
  the LM head; on XLA:CPU these are YNNPACK/Eigen dot fusions, their bias, GELU or residual add
  fused in);
- ``attention kernel``: the fused C++ attention (an FFI custom call);
- ``layer norm / softmax``: fusions holding a ``reduce`` (and no dot);
- ``rotary``: fusions holding ``cosine``/``sine``;
- ``weight slicing``: ``dynamic-slice`` fusions (the layer stack's stacked weights indexed per
  layer);
- ``other elementwise``: everything else XLA runs;
- ``launch and host``: the pass's wall time less the operations' sum where positive (Python,
  dispatch, the thunk executor's scheduling, copying the result back); operations run at once on
  several cores can sum past the wall time, so shares are of the operations' time.

Usage::

    .venv/bin/python benchmarks/latency_profile.py --shape t33 --length 300 [--runs 3]

It prints one JSON line (per-class milliseconds per pass and shares) and, with ``--markdown``, a
table for docs/benchmarks.md. Under load the shares still hold roughly; the milliseconds do not.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

CLASSES = ("dense GEMM", "attention kernel", "layer norm / softmax", "rotary", "weight slicing",
           "other elementwise", "launch and host")


def hlo_classes(dump: Path) -> dict[tuple[str, str], str]:
    """(module, instruction name) -> class, from the optimised modules XLA dumped (a fusion's
    class is what its fused computation computes; the last dump of a module name wins)."""
    modules: dict[str, str] = {}
    for path in sorted(glob.glob(str(dump / "module_*after_optimizations.txt"))):
        modules[re.match(r"module_\d+\.(.+?)\.\w+_after_optimizations\.txt", Path(path).name)[1]] = Path(path).read_text()
    classes = {}
    for module, text in modules.items():
        computations: dict[str, str] = {}
        calls: dict[str, str] = {}
        for block in re.split(r"\n(?=\S)", text):  # each computation starts at column 0
            header = re.match(r"(?:ENTRY )?%?([\w.\-]+)", block)
            if header:
                computations[header[1]] = block
            for name, called in re.findall(r"%?([\w.\-]+) = [^\n]*? calls=%?([\w.\-]+)", block):
                calls[name] = called
        for name, called in calls.items():
            classes[module, name] = classify(computations.get(called, ""))
        for body in computations.values():  # unfused instructions: their own opcode
            for name, opcode in re.findall(r"^\s+%?([\w.\-]+) = \S+ ([\w\-]+)\(", body, re.M):
                if (module, name) not in classes and opcode in OPCODES:
                    classes[module, name] = OPCODES[opcode]
    return classes


OPCODES = {"dot": "dense GEMM", "custom-call": "attention kernel", "reduce": "layer norm / softmax",
           "cosine": "rotary", "sine": "rotary", "dynamic-slice": "weight slicing", "add": "other elementwise",
           "multiply": "other elementwise", "copy": "other elementwise", "concatenate": "other elementwise"}


def classify(body: str) -> str:
    if re.search(r"\bdot\(", body):
        return "dense GEMM"
    if "custom-call" in body or "custom_call_target" in body:
        return "attention kernel"
    if re.search(r"\breduce\(", body):
        return "layer norm / softmax"
    if re.search(r"\b(cosine|sine)\(", body):
        return "rotary"
    if "dynamic-slice" in body:
        return "weight slicing"
    return "other elementwise"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="t33", choices=sorted(common.SHAPES))
    parser.add_argument("--length", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="flamino-profile-"))
    dump = scratch / "hlo"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={dump} --xla_dump_hlo_as_text".strip()
    os.environ.setdefault("FLAMINO_CACHE", str(scratch / "cache"))  # compile here, so XLA dumps the module
    import jax

    from flamino_core import Engine, load_weights

    engine = Engine(load_weights(f"random:{common.SHAPES[args.shape]}"))
    protein = common.fixed_protein(args.length)
    for _ in range(2):
        engine.run([protein])
    walls = []
    with jax.profiler.trace(str(scratch / "trace"), create_perfetto_trace=True):
        for _ in range(args.runs):
            start = time.perf_counter()
            engine.run([protein])
            walls.append(time.perf_counter() - start)
    trace = glob.glob(str(scratch / "trace" / "**" / "*perfetto_trace.json.gz"), recursive=True)[0]
    events = json.load(gzip.open(trace))
    events = events["traceEvents"] if isinstance(events, dict) else events
    classes = hlo_classes(dump)
    per_class = collections.Counter()
    unknown = collections.Counter()
    for event in events:
        args_ = event.get("args") or {}
        if event.get("ph") != "X" or "hlo_op" not in args_:
            continue
        kind = classes.get((args_.get("hlo_module"), args_["hlo_op"]))
        if kind is not None:
            per_class[kind] += event.get("dur", 0) / 1e3 / args.runs  # microseconds -> ms per pass
        else:  # control flow (while, call: their bodies' ops are counted) or not in the dump
            unknown[f"{args_.get('hlo_module')}/{args_['hlo_op']}"] += event.get("dur", 0) / 1e3 / args.runs
    pass_ms = 1e3 * sum(walls) / len(walls)
    ops_ms = sum(per_class.values())
    # XLA:CPU runs independent operations at once on the machine's cores (a layer's weight slice
    # beside the previous layer's products), so the operations' sum can pass the wall time: the
    # shares are of the operations' time; the wall time less that sum is launch and host (when positive).
    per_class["launch and host"] = max(0.0, pass_ms - ops_ms)
    total = ops_ms + per_class["launch and host"]
    row = {"shape": args.shape, "residues": args.length, "runs": args.runs, "pass_ms": round(pass_ms, 1),
           "operations_ms": round(ops_ms, 1), "ms": {k: round(per_class[k], 1) for k in CLASSES},
           "share": {k: round(per_class[k] / total, 3) for k in CLASSES},
           "unclassified_ms": {k: round(v, 1) for k, v in unknown.most_common(5)},
           "load_average": common.load_average(), "backend": engine.backend.describe()}
    print(json.dumps(row))
    if args.markdown:
        print(f"\n| class | ms per pass (summed over threads) | share |\n|---|---:|---:|")
        for k in CLASSES:
            print(f"| {k} | {per_class[k]:.1f} | {per_class[k] / total:.0%} |")
        print(f"| operations, summed | {ops_ms:.1f} | |\n| whole pass, wall | {pass_ms:.1f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
