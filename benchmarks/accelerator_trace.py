"""Where an accelerator pass spends its device time, from the Perfetto trace that
``benchmarks/accelerator_mfu.py --profile DIR`` writes (``DIR/trace.json.gz``; JSON, read without
TensorBoard or a TPU).

The device's "XLA Ops" track holds every HLO operation the chip ran with its time, its category
as XLA names it (convolution fusion: a matmul with what is fused into it; loop fusion:
elementwise work; custom-call: Pallas kernels; data formatting: copies and transposes) and its
model FLOPs. ``while`` ops (the scanned layer stack) contain the others and are left out, so the
categories add up to the device's busy time. Usage::

    python3 benchmarks/accelerator_trace.py trace.json.gz [--peak-tflops 197]
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import defaultdict


def device_tracks(events: list[dict]) -> tuple[int, dict[str, int]]:
    """The first accelerator process's id and its threads' ids by name."""
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    device = next(pid for pid, name in processes.items() if "/device:" in name and "CPU" not in name)
    threads = {e["args"]["name"]: e["tid"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name" and e["pid"] == device}
    return device, threads


def summary(events: list[dict], peak_tflops: float) -> str:
    device, threads = device_tracks(events)
    spans = [e for e in events if e.get("ph") == "X" and e["pid"] == device]
    modules = [e for e in spans if e["tid"] == threads["XLA Modules"]]
    ops = [e for e in spans if e["tid"] == threads["XLA Ops"] and not e["name"].startswith("while")]
    start = min(e["ts"] for e in modules)
    stop = max(e["ts"] + e["dur"] for e in modules)
    busy = sum(e["dur"] for e in modules)
    lines = [f"programs: {len(modules)}, span {(stop - start) / 1e3:.1f} ms, device busy {busy / 1e3:.1f} ms "
             f"({100 * busy / (stop - start):.1f}% of the span)", "",
             "| category | ms | share | TFLOP/s | of the peak |", "|---|---:|---:|---:|---:|"]
    time_by, flops_by = defaultdict(float), defaultdict(float)
    for e in ops:
        category = e.get("args", {}).get("hlo_category", "?")
        time_by[category] += e["dur"]
        flops_by[category] += float(e.get("args", {}).get("model_flops") or 0)
    total = sum(time_by.values())
    for category, micros in sorted(time_by.items(), key=lambda item: -item[1]):
        if micros < 0.005 * total:
            continue
        tflops = flops_by[category] / (micros * 1e-6) / 1e12
        lines.append(f"| {category} | {micros / 1e3:.1f} | {100 * micros / total:.1f}% | {tflops:.1f} | "
                     f"{100 * tflops / peak_tflops:.0f}% |")
    lines += ["", "Longest operations (summed over their calls):"]
    by_name = defaultdict(lambda: [0, 0.0, ""])
    for e in ops:
        entry = by_name[e["name"]]
        entry[0] += 1
        entry[1] += e["dur"]
        entry[2] = e.get("args", {}).get("long_name", "")[:160]
    for name, (calls, micros, long_name) in sorted(by_name.items(), key=lambda item: -item[1][1])[:10]:
        lines.append(f"- {name}: {micros / 1e3:.1f} ms in {calls} calls ({100 * micros / total:.1f}%): {long_name}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--peak-tflops", type=float, default=197.0, help="the chip's bf16 peak (TPU v5e: 197)")
    args = parser.parse_args(argv)
    with gzip.open(args.trace) as handle:
        trace = json.load(handle)
    print(summary(trace["traceEvents"] if isinstance(trace, dict) else trace, args.peak_tflops))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
