"""The table and the report of a ``make bench`` run (``run.py`` runs it, ``--report`` reprints it).

Reads the records the workers returned (one dict per measurement, see ``worker.py``) and builds
the Markdown block that ``run.py`` prints and writes into docs/benchmarks.md.
"""

from __future__ import annotations

import common

# Issue 13's targets against HF (varlen 1.3x, scan 1.2x, latency 1.0x); issue 3's for the cold
# start and the efficiency; issue 22's against esm.cpp (flamino fp32 >= 1.0x esm.cpp FP32 at
# every shape and workload, the opt-in precision >= 1.0x esm.cpp INT8) and the parity bound.
TARGETS = {
    "varlen": 1.3,  # flamino throughput / HF
    "scan": 1.2,  # HF time / flamino time
    "latency": 1.0,
    "esmcpp": 1.0,  # esm.cpp time / flamino time, every workload
    "cold_warm_t6_s": 3.0,
    "efficiency": 0.75,  # t12 and t30
    "parity": 1e-4,  # max |logit - HF logit| of flamino's fp32 default
    "start_over_floor_s": 0.5,  # whole-process one-protein embed, warm caches, minus the JAX floor
    "process64_vs_hf": 1.5,  # whole-process 64 proteins, --include mean,per_tok,logits
}
DEFAULT = {"attention": "auto", "precision": None}
KERNEL_OFF = {"attention": "xla", "precision": None}


def _find(records, system, measurement, shape=None, **match):
    """Records of one system's measurement; ``match``: tags that must be equal (absent = None;
    flamino's attention defaults to "auto" for results from before the kernel-off rows)."""
    def tag(r, k):
        return r.get(k, "auto" if k == "attention" else None)

    return [r for r in records if r["system"] == system and r["measurement"] == measurement
            and (shape is None or r["shape"] == shape) and all(tag(r, k) == v for k, v in match.items())]


def _one(records, *a, **k):
    found = [r for r in _find(records, *a, **k) if "error" not in r]
    return found[-1] if found else None


def _best_median(records, system, measurement, shape, key, **match):
    """The lowest median of ``record[key]`` over the rounds of one measurement (None if none)."""
    medians = [r[key]["median_s"] for r in _find(records, system, measurement, shape, **match)
               if "error" not in r and key in r]
    return min(medians) if medians else None


def _median(values):
    values = sorted(values)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else 0.5 * (values[mid - 1] + values[mid])


def _fmt(value, spec: str) -> str:
    return "–" if value is None else spec.format(value)


def _ratio(slow, fast):
    return slow / fast if slow and fast else None


def _ok(flag):
    return "–" if flag is None else ("**met**" if flag else "**missed**")


def _rss(*records) -> str:
    return " / ".join(f"{r['peak_rss_mib']:.0f}" if r and "peak_rss_mib" in r else "–" for r in records)


def matmul_peak(records) -> tuple[float | None, float | None]:
    """fp32 matmul peak (GFLOP/s): JAX's best median of the start/end runs, and torch's."""
    jax_runs = [r["gflops_median"] for r in _find(records, "jax", "peak") if "error" not in r]
    torch_runs = [r["gflops_median"] for r in _find(records, "torch", "peak") if "error" not in r]
    return max(jax_runs, default=None), max(torch_runs, default=None)


SHARED_MARK = " ‡"
MIN_CPU_SHARE = 0.7  # a system alone on its cores measured 0.87-1.0 here


def _mark(*records) -> str:
    """" ‡" when any of these measurements ran on a CPU busy with other work."""
    for r in records:
        share = (r or {}).get("cpu_share")
        if share is not None and share < MIN_CPU_SHARE:
            return SHARED_MARK
        if r and share is None and r.get("load_at_start", 0) > r.get("threads", 2) + 1.5:
            return SHARED_MARK  # cold starts: no timed loop, so judge by the load when they began
    return ""


# --- one pairing: a flamino path against HF and an esm.cpp variant ------------------------------
def _flamino_path(records, shape, match) -> str:
    paths = sorted({r.get("attention_path") for r in _find(records, "flamino", "latency", shape, **match)
                    + _find(records, "flamino", "varlen", shape, **match) if r.get("attention_path")})
    path = ", ".join(paths) or match["attention"]
    if match["attention"] == "xla":
        path += ", kernel off"
    return f"{path}, {match['precision'] or 'fp32'}" + (" (opt-in)" if match["precision"] else "")


def _paths(records, shape, match, variant) -> str:
    hf = sorted({r.get("attn_implementation") for r in _find(records, "hf", "varlen", shape)
                 + _find(records, "hf", "latency", shape) if r.get("attn_implementation")})
    esm = sorted({r.get("esmcpp_path") for r in _find(records, "esmcpp", "latency", shape, variant=variant)
                  if r.get("esmcpp_path")})
    return (f" [flamino: {_flamino_path(records, shape, match)}; HF: {', '.join(hf) or '?'} fp32; "
            f"esm.cpp: {', '.join(esm) or variant + ' (not run)'}]")


def _pairing_rows(records, shape, match, variant, targets: bool) -> list[list[str]]:
    """Varlen, latency, scan and accuracy rows of flamino on ``match`` against HF and esm.cpp's
    ``variant``. ``targets``: whether the issues' targets apply (not to the kernel-off rows)."""
    label = _paths(records, shape, match, variant)
    against_hf = targets and match["precision"] is None  # the opt-in precision has no HF target
    rows = []

    def row(measurement, values, speedups, key, f, h, e):
        fh, fe = speedups
        want = []
        if against_hf:
            want.append((f">= {TARGETS[key]}x HF", fh, TARGETS[key]))
        if targets:
            want.append((f">= {TARGETS['esmcpp']}x esm.cpp" + (" INT8" if variant == "int8" else ""), fe,
                         TARGETS["esmcpp"]))
        met = [None if ratio is None else ratio >= bound for _, ratio, bound in want]
        ok = None if not want or None in met else all(met)
        rows.append([shape, measurement + label + _mark(f, h, e), *values, _fmt(fh, "{:.2f}x"), _fmt(fe, "{:.2f}x"),
                     ", ".join(w for w, _, _ in want) or "–", _ok(ok), _rss(f, h, e)])

    f, h = _one(records, "flamino", "varlen", shape, **match), _one(records, "hf", "varlen", shape)
    e = _one(records, "esmcpp", "varlen", shape, variant=variant)
    rate = [r and r["residues"] / r["median_s"] for r in (f, h, e)]
    if f:
        proteins = f"{f.get('proteins', common.VARLEN_COUNT)} proteins"
        row(f"varlen throughput, {proteins} (residues/s)", [_fmt(x, "{:.0f}") for x in rate],
            (_ratio(rate[0], rate[1]), _ratio(rate[0], rate[2])), "varlen", f, h, e)
    f, h = _one(records, "flamino", "latency", shape, **match), _one(records, "hf", "latency", shape)
    e = _one(records, "esmcpp", "latency", shape, variant=variant)
    for length in common.LATENCY_LENGTHS if f else ():
        t = [_best_median(records, "flamino", "latency", shape, str(length), **match),
             _best_median(records, "hf", "latency", shape, str(length)),
             _best_median(records, "esmcpp", "latency", shape, str(length), variant=variant)]
        row(f"latency, 1 protein of {length} (ms, warm)", [_fmt(x and x * 1e3, "{:.1f}") for x in t],
            (_ratio(t[1], t[0]), _ratio(t[2], t[0])), "latency", f, h, e)
    f, h = _one(records, "flamino", "scan", shape, **match), _one(records, "hf", "scan", shape)
    e = _one(records, "esmcpp", "scan", shape, variant=variant)
    if f:
        t = [r and r["median_s"] for r in (f, h, e)]
        note = "" if f.get("timed_positions", 300) >= common.SCAN_LENGTH else \
            f" [{f['timed_positions']} of 300 timed, scaled]"
        row(f"masked-marginal scan, 300 residues (s){note}", [_fmt(x, "{:.1f}") for x in t],
            (_ratio(t[1], t[0]), _ratio(t[2], t[0])), "scan", f, h, e)
    rows += _accuracy_rows(records, shape, match, variant, label, parity=against_hf)
    return rows


def _accuracy_rows(records, shape, match, variant, label, parity: bool) -> list[list[str]]:
    """The same varlen and scan outputs against HF's (``accuracy.compare``, run by run.py)."""
    rows = []
    acc = [(_one(records, "flamino", m, shape, **match) or {}).get("accuracy", {}) for m in ("varlen", "scan")]
    esm = [(_one(records, "esmcpp", m, shape, variant=variant) or {}).get("accuracy", {}) for m in ("varlen", "scan")]
    if acc[0] or esm[0]:
        def cell(a):
            return _fmt(a.get("max_abs_dlogit"), "{:.1e}") + _fmt(a.get("logit_pearson"), " (r = {:.6f})")

        worst = acc[0].get("max_abs_dlogit")
        proteins = common.varlen_count(shape)
        rows.append([shape, f"accuracy: max \\|logit - HF logit\\| over the {proteins} proteins (Pearson r)" + label,
                     cell(acc[0]), "reference", cell(esm[0]), "–", "–",
                     f"flamino <= {TARGETS['parity']:.0e}" if parity else "–",
                     _ok(worst <= TARGETS["parity"]) if parity and worst is not None else "–", "–"])
    if acc[1] or esm[1]:
        n = acc[1].get("scan_positions") or esm[1].get("scan_positions")
        rows.append([shape, f"accuracy: Spearman of the masked-marginal scores with HF's ({n} positions x 19)"
                     + label, _fmt(acc[1].get("scan_spearman"), "{:.6f}"), "reference",
                     _fmt(esm[1].get("scan_spearman"), "{:.6f}"), "–", "–", "–", "–", "–"])
    return rows


# --- the table ---------------------------------------------------------------------------------
def _cold_rows(records, shape) -> list[list[str]]:
    rows = []
    hf = [r for r in _find(records, "hf", "cold", shape) if "error" not in r]
    esm = {v: [r for r in _find(records, "esmcpp", "cold", shape, variant=v) if "error" not in r]
           for v in ("fp32", "int8")}
    hc = _median([r["first_embedding_s"] for r in hf])
    ec = {v: _median([r["first_embedding_s"] for r in rs]) for v, rs in esm.items()}
    rss_h = max(hf, key=lambda r: r["peak_rss_mib"], default=None)
    rss_e = max(esm["fp32"], key=lambda r: r["peak_rss_mib"], default=None)
    empty = _one(records, "flamino", "cold", shape, cache="empty")
    warm = [r for r in _find(records, "flamino", "cold", shape, cache="warm") if "error" not in r]
    for name, fc, group in (("empty", empty and empty["first_embedding_s"], [empty] if empty else []),
                            ("warm", _median([r["first_embedding_s"] for r in warm]), warm)):
        if fc is None:
            continue
        target = name == "warm" and shape == "t6"
        rows.append([shape, f"cold start to first embedding, {name} compile cache (s)" + _mark(*group, *hf),
                     _fmt(fc, "{:.2f}"), _fmt(hc, "{:.2f}"), _fmt(ec["fp32"], "{:.2f}"), _fmt(_ratio(hc, fc), "{:.2f}x"),
                     _fmt(_ratio(ec["fp32"], fc), "{:.2f}x"), "< 3 s" if target else "–",
                     _ok(fc < TARGETS["cold_warm_t6_s"]) if target else "–",
                     _rss(max(group, key=lambda r: r["peak_rss_mib"]), rss_h, rss_e)])
    if ec["int8"] is not None:
        rows.append([shape, "cold start to first embedding, esm.cpp INT8 (its quantized GGUF) (s)", "–", "–",
                     _fmt(ec["int8"], "{:.2f}"), "–", "–", "–", "–",
                     _rss(None, None, max(esm["int8"], key=lambda r: r["peak_rss_mib"]))])
    return rows


def _process_rows(records, shape) -> list[list[str]]:
    """Whole-process rows (``whole_process.py``): medians of interleaved runs."""
    rows = []

    def get(system, job):
        return next((r for r in _find(records, system, "process", shape, job=job) if "error" not in r), None)

    f, h, e, floor, bare = (get(s, "one") for s in ("flamino", "hf", "esmcpp", "floor", "floor_no_teardown"))
    if f:
        t = [r and r["median_s"] for r in (f, h, e)]
        bound = floor and floor["median_s"] + TARGETS["start_over_floor_s"]
        rows.append([shape, f"whole process: `flamino embed` of 1 protein ({f['residues']} residues), warm caches (s) "
                     f"[JAX floor, a process that imports JAX and runs one op: {_fmt(floor and floor['median_s'], '{:.2f}')} s; "
                     f"the same ended with os._exit as flamino ends: {_fmt(bare and bare['median_s'], '{:.2f}')} s; "
                     f"CPU time, flamino {f['cpu_s']:.2f} s against that floor's "
                     f"{_fmt(bare and bare['cpu_s'], '{:.2f}')} s (a shared machine moves the wall time more); "
                     f"the target: flamino's wall time within {TARGETS['start_over_floor_s']} s of the floor's, "
                     "both measured in this run]"
                     + _mark(f, h, e, floor), *[_fmt(x, "{:.2f}") for x in t], _fmt(_ratio(t[1], t[0]), "{:.2f}x"),
                     _fmt(_ratio(t[2], t[0]), "{:.2f}x"), f"<= floor + {TARGETS['start_over_floor_s']} s",
                     _ok(None if bound is None else t[0] <= bound), _rss(f, h, e)])
    f, h = get("flamino", "64"), get("hf", "64")
    if f:
        ratio = _ratio(h and h["median_s"], f["median_s"])
        rows.append([shape, f"whole process: 64 proteins ({f['residues']:,} residues) with --include "
                     "mean,per_tok,logits (s)" + _mark(f, h), _fmt(f["median_s"], "{:.2f}"),
                     _fmt(h and h["median_s"], "{:.2f}"), "–", _fmt(ratio, "{:.2f}x"), "–",
                     f">= {TARGETS['process64_vs_hf']}x HF", _ok(None if ratio is None else ratio >= TARGETS["process64_vs_hf"]),
                     _rss(f, h, None)])
    return rows


def _efficiency_rows(records, shape, peak) -> list[list[str]]:
    rows = []
    for name, meas in (("varlen forward", "varlen"), ("masked scan", "scan")):
        rs = [_one(records, "flamino", meas, shape, **DEFAULT), _one(records, "hf", meas, shape),
              _one(records, "esmcpp", meas, shape, variant="fp32")]
        gf = [r and r["flops"] / r["median_s"] / 1e9 for r in rs]
        if not peak or gf[0] is None:
            continue
        cells = [_fmt(g and g / peak, "{:.0%}") + _fmt(g, " ({:.0f} GF/s)") for g in gf]
        target = meas == "varlen" and shape in ("t12", "t30")
        fe = gf[0] / peak
        rows.append([shape, f"efficiency, {name}: achieved FLOP/s / fp32 matmul peak" + _mark(*rs), *cells,
                     "–", "–", ">= 75%" if target else "–", _ok(fe >= TARGETS["efficiency"]) if target else "–", "–"])
    return rows


def _gate_rows(records, shape) -> list[list[str]]:
    """The opt-in precision against fp32 under esm.cpp's gates (``precision_gates.py``)."""
    rows = []
    for r in _find(records, "flamino", "gates", shape):
        if "error" in r:
            continue
        rows.append([shape, f"{r['precision']} against fp32 under esm.cpp's gates, shared DMS assay (161 residues, 922 "
                     f"substitutions): PPPL {r['pppl_fp32']:.3f} -> {r['pppl_mode']:.3f} (drift {r['pppl_drift']:.3f}), "
                     f"Spearman drift {r['dms_spearman_drift']:.1e}, logit correlation {r['logit_correlation']:.5f}",
                     "pass" if r["passes"] else "FAIL", "–", "–", "–", "–",
                     "PPPL drift < 0.1, Spearman drift < 0.01, correlation >= 0.999", _ok(r["passes"]), "–"])
    return rows


def build_rows(result: dict) -> list[list[str]]:
    records = result["records"]
    peak, _ = matmul_peak(records)
    rows = []
    for shape in result["info"]["shapes"]:
        rows += _pairing_rows(records, shape, DEFAULT, "fp32", targets=True)
        if any(_find(records, "flamino", m, shape, **KERNEL_OFF) for m in ("latency", "varlen", "scan")):
            rows += _pairing_rows(records, shape, KERNEL_OFF, "fp32", targets=False)  # not run at t33
        fast = sorted({r["precision"] for r in records if r["system"] == "flamino" and r["shape"] == shape
                       and r.get("precision")})
        for precision in fast:
            rows += _pairing_rows(records, shape, {"attention": "auto", "precision": precision}, "int8", targets=True)
        rows += _cold_rows(records, shape)
        rows += _process_rows(records, shape)
        rows += _efficiency_rows(records, shape, peak)
        rows += _gate_rows(records, shape)
    # Engine properties (flamino only).
    checks = [r for r in records if r["system"] == "flamino" and "error" not in r
              and r.get("recompiles_new_lengths") is not None]
    if checks:
        total = sum(r["recompiles_new_lengths"] for r in checks)
        where = ", ".join(sorted({f"{r['shape']} {r['measurement']}" for r in checks}))
        rows.append(["all", f"recompilations after warm-up, new lengths in existing buckets ({where})",
                     str(total), "–", "–", "–", "–", "0", _ok(total == 0), "–"])
    varlens = [r for r in records if r["system"] == "flamino" and r["measurement"] == "varlen" and "error" not in r]
    if varlens:
        ok = all(r["only_requested_outputs"] for r in varlens)
        rows.append(["all", "attention maps / hidden states only on request (default run returns final "
                     "representation + logits only)", "yes" if ok else "no", "–", "–", "–", "–", "yes", _ok(ok), "–"])
    return rows


HEADER = ["shape", "measurement [each system's path]", "flamino", "HF transformers", "esm.cpp",
          "flamino vs HF", "flamino vs esm.cpp", "target", "", "peak RSS flamino / HF / esm.cpp (MiB)"]


def markdown_table(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def report(result: dict) -> str:
    info, records = result["info"], result["records"]
    m = info["machine"]
    peak, torch_peak = matmul_peak(records)
    loads = [r["load_at_start"] for r in records if "load_at_start" in r]
    shares = [r["cpu_share"] for r in records if r.get("cpu_share") is not None]
    errors = [f"- {r['system']} {r['measurement']} {r['shape']}: {r['error']}" for r in records if "error" in r]
    v = m["versions"]
    # The run itself keeps the 1-minute load near `threads`; more than that, or threads that got
    # clearly less than their cores while timing, means something else was running.
    busy = (info["loadavg_before"][0] > 0.5 or (_median(loads) or 0) > info["threads"] + 0.5
            or min(shares, default=1) < 0.75)
    lines = [
        f"Run {info['date']} (git {info['git']}), {info['total_s'] / 60:.1f} min in total.",
        "",
        f"- Command: `{info['command']}`" + (" (what `make bench` runs)" if not info["quick"] else ""),
        f"- Machine: {m['cpu']} ({m['cpu_flags']}), {m['cores']} cores, {m['mem_gb']} GB RAM, Linux {m['kernel']}",
        f"- Software: Python {m['python']}, jax {v['jax']} (jaxlib {v['jaxlib']}), flax {v['flax']}, "
        f"torch {v['torch']}, transformers {v['transformers']}, numpy {v['numpy']}; esm.cpp: "
        f"{info.get('esmcpp', 'not run')}",
        f"- Threads: {info['threads']} for every system (process affinity, torch.set_num_threads, "
        f"ESM_NUM_THREADS); devices: {_devices(records)}",
        f"- flamino: {_backend(records)}",
        f"- fp32 matmul peak (4096x4096 `jnp.dot`, median of 5, best of the start and end runs): "
        f"{_fmt(peak, '{:.0f}')} GFLOP/s; torch `mm` (same protocol) for reference: {_fmt(torch_peak, '{:.0f}')} GFLOP/s",
        f"- Load average (1 min) before / after: {info['loadavg_before'][0]:.2f} / {info['loadavg_after'][0]:.2f}; "
        f"at the start of each measurement: {min(loads, default=0):.2f} to {max(loads, default=0):.2f}",
        f"- CPU share while timing (process CPU time / (wall time x threads), median per measurement): "
        f"{_fmt(min(shares, default=None), '{:.2f}')} to {_fmt(max(shares, default=None), '{:.2f}')}"
        " (about 1 when a system has its cores to itself)",
    ]
    if busy:
        lines.append("- **The CPU was shared** with other work during this run (load average above idle): "
                     "absolute times are inflated and noisy; the systems ran interleaved, so ratios are "
                     "less affected, but rerun on an idle machine before trusting small differences.")
    rows = build_rows(result)
    lines += ["", markdown_table(rows), ""]
    if any(SHARED_MARK in r[1] for r in rows):
        lines += [f"{SHARED_MARK.strip()} measured while other work shared the CPU (a timed process got less "
                  f"than {MIN_CPU_SHARE:.0%} of its cores, or a cold start began at a load average above "
                  "threads + 1.5): treat as noisy.", ""]
    if errors:
        lines += ["Failed measurements:", *errors, ""]
    return "\n".join(lines)


def _backend(records) -> str:
    """What flamino's default engine ran with (hardware.Backend.describe), as its workers said."""
    described = {r["backend"] for r in records if r["system"] == "flamino" and r.get("backend")
                 and r.get("attention", "auto") == "auto" and not r.get("precision")}
    # (the cold group's workers are whole processes (the CLI), which say nothing of it)
    return "; ".join(sorted(described)) or "not recorded by this run's workloads"


def _devices(records) -> str:
    jax_peak = next((r for r in records if r["system"] == "jax" and "platform" in r), None)
    hf = {r.get("device") for r in records if r["system"] in ("hf", "torch") and r.get("device")}
    where = jax_peak["platform"] if jax_peak else "cpu"
    if jax_peak and jax_peak.get("device_kind") and where != "cpu":
        where += f" ({jax_peak['device_kind']})"
    return f"JAX on {where}, HF on {', '.join(sorted(hf)) or 'cpu'}, esm.cpp on cpu"
