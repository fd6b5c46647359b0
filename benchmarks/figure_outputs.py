"""The core's Plotly figures of one checkout, built on fixed inputs and hashed, to compare two checkouts.

#49's architecture round (runtime/ -> engine/, predict/ -> predictors/, lines wrapped, a ``Numbering`` passed
where ``first: int`` was) must not change any figure. ``run`` re-executes this file with PYTHONPATH = the checkout
(its own flamino_core, not the venv's editable /work/main), HF_HUB_OFFLINE=1 and a fresh FLAMINO_CACHE; it runs
the untrained ``random:tiny`` model once on real inputs (/work/shared: HBB, the NEIME DMS's first 60 rows and
wild type, 1A7G chain E), feeds the outputs to the figure builders and writes each ``fig.to_json()`` into OUT
with a manifest (sha256 per figure). ``compare``: identical or different per figure; for a different one where
the JSON first differs and the largest numeric difference. --kernel copies a built _attention_cpu*.so into the
checkout's flamino_core/model/ (a fresh worktree lacks it and would run pure JAX). A script, not a test (~40 s).

    git worktree add --detach /tmp/fig_base 93487c8; git worktree add --detach /tmp/fig_head main
    PY=/work/main/.venv/bin/python; SO=/work/main/flamino_core/model/_attention_cpu.cpython-311-x86_64-linux-gnu.so
    $PY benchmarks/figure_outputs.py run /tmp/fig_base /tmp/figs_base [--kernel $SO]
    $PY benchmarks/figure_outputs.py run /tmp/fig_head /tmp/figs_head [--kernel $SO]
    $PY benchmarks/figure_outputs.py compare /tmp/figs_base /tmp/figs_head
"""

import argparse
import base64
import hashlib
import importlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

SHARED = Path(os.environ.get("FLAMINO_SHARED", "/work/shared"))
DMS = SHARED / "dms" / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"
STRUCTURE, CHAIN = SHARED / "structures" / "1A7G.cif", "E"
MODEL = "random:tiny"


def module(*names: str):
    """The first of ``names`` the checkout has: #49 moved runtime/ -> engine/ and predict/ -> predictors/
    (and a fit's module was renamed), so the base and the head import the same code by different paths."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            continue
    raise ModuleNotFoundError(" / ".join(names))


def numbered(fn, *args, first: int = 1, **kwargs):
    """Call ``fn`` numbered from ``first``: #49 replaced ``first: int`` parameters by ``numbering: Numbering``,
    so the base takes ``first=16`` where the head takes ``numbering=Numbering(16)``; the signature says which."""
    params = inspect.signature(fn).parameters
    if "numbering" in params:
        from flamino_core.numbering import Numbering
        return fn(*args, numbering=Numbering(first), **kwargs)
    return fn(*args, first=first, **kwargs)


def both(name: str, fn, *args, **kwargs) -> dict:
    """The figure numbered from 1 and from 16 (a record such as NAME/16-162: the axes show residue numbers)."""
    return {f"{name}_first{first}": numbered(fn, *args, first=first, **kwargs) for first in (1, 16)}


def inputs() -> dict:
    """The fixed real inputs: HBB (147 residues), the DMS's wild type and 60 rows, 1A7G chain E, two more records."""
    text = "".join((SHARED / "fasta" / name).read_text() for name in ("HBB_HUMAN.fa", "uniprot_two.fa"))
    blocks = [block.split("\n", 1) for block in text.split(">")[1:]]
    records = [(head.split()[0], "".join(body.split())) for head, body in blocks]
    rows = DMS.read_text().splitlines()[:61]
    mutant, mutated = rows[1].split(",")[:2]  # the wild type: undo the first row's substitution
    pos = int(mutant[1:-1])
    wild_type = f"{mutated[:pos - 1]}{mutant[0]}{mutated[pos:]}"
    return {"hbb": records[0][1], "records": records + [("A0A1I9GEU1", wild_type)], "dms60": "\n".join(rows) + "\n",
            "wild_type": wild_type}


def model_outputs(data: dict) -> dict:
    """The model run once: HBB with logits, the last layer's attention and contacts; every record's mean."""
    from flamino_core.cli.common import load_engine
    engine = load_engine(MODEL)
    hbb, *_ = engine.run([data["hbb"]], logits=True, attention_layers=(-1,), contacts=True)
    means = np.stack([o.mean for o in engine.run([s for _, s in data["records"]], logits=False)])
    return {"engine": engine, "hbb": hbb, "means": means}


def sequence_figures(data: dict, out: dict) -> dict:
    """The Masked, Attention and Embeddings pages' figures of HBB, numbered from 1 and (a NAME/16-162 record)
    from 16 where the axes show residue numbers."""
    from flamino_core import figures
    from flamino_core.analysis import outputs as a
    from flamino_core.variants.figures import substitution_map
    from flamino_core.variants.substitution_maps import substitution_scores
    hbb, o = data["hbb"], out["hbb"]
    probs, entropies = a.amino_acid_probabilities(o.logits), a.residue_entropy(o.logits)
    subs = substitution_scores(a.log_softmax(o.logits.astype(np.float64)), hbb)
    maps = o.attentions[0]  # (H, L+2, L+2) of the last layer
    per_head = a.crop_square(a.strip_special(maps), 0, 40)
    result = a.pca(o.final, n_components=3)
    figs = {**both("probability_heatmap", figures.probability_heatmap, probs, hbb, entropies),
            **both("substitution_map", substitution_map, subs, hbb, "wt-marginals"),
            **both("attention_grid", figures.attention_grid, per_head, title="grid"),
            **both("contact_map", figures.contact_map, o.contacts, hbb, "contacts"),
            **both("residue_pca_scatter", figures.residue_pca_scatter, result, hbb, title="pca")}
    figs["substitution_heatmap"] = numbered(figures.substitution_heatmap, subs, hbb, "wt-marginals")
    for apc in (False, True):
        matrix = a.crop_square(a.attention_view(maps, None if apc else 2, apc, False), 0, 30)
        figs[f"attention_heatmap_apc{int(apc)}"] = figures.attention_heatmap(
            matrix, a.residue_labels(hbb[:30], 1), "attention", diverging=apc)
    figs["residue_pca_scatter_3d_class"] = numbered(figures.residue_pca_scatter, result, hbb, colour_by="class",
                                                    dims=3)
    figs["explained_variance_bars"] = figures.explained_variance_bars(result.explained_variance_ratio, "variance")
    masked, unmasked = probs[:, 5], probs[:, 6]  # two positions' distributions stand in for masked / unmasked
    figs["distribution_bars"] = figures.distribution_bars(masked, unmasked, 6, hbb[5], other_mass=0.01)
    return figs


def structure_figures(data: dict, out: dict) -> dict:
    """1A7G chain E's sequence run through the model; its contacts against the chain's, and the 3D trace."""
    from flamino_core.structure.align import choose_chain
    from flamino_core.structure.contacts import top_predictions, true_contacts
    from flamino_core.structure.figures import contact_comparison_map, structure_trace_3d
    reading = module("flamino_core.structure.files.reading", "flamino_core.structure.reading")  # moved too
    parsed = reading.read_structure(STRUCTURE)
    sequence = reading.chain_residues(parsed, CHAIN).sequence
    (o,) = out["engine"].run([sequence], logits=True, contacts=True)
    alignment = choose_chain(parsed, sequence, CHAIN)
    truth = true_contacts(alignment)
    top = top_predictions(o.contacts, truth, "all", k=len(sequence) // 2)
    entropy = module("flamino_core.analysis.outputs").residue_entropy(o.logits)
    return {**both("contact_comparison_map", contact_comparison_map, o.contacts, truth, top, "vs 1A7G E"),
            **both("structure_trace_3d", structure_trace_3d, alignment, entropy, "entropy", "trace")}


def dms_figures(data: dict, out: dict) -> dict:
    """The DMS page's scatter and heatmaps of the first 60 rows, scored masked-marginals; the Variants page's
    map with the table's variants marked on the wild type's wt-marginals substitution map."""
    from flamino_core.analysis.outputs import log_softmax
    from flamino_core.variants import dms
    from flamino_core.variants.figures import dms_heatmaps, dms_scatter, variant_map
    from flamino_core.variants.substitution_maps import substitution_scores
    from flamino_core.variants.metrics import dms_metrics
    table = dms.parse_dms(data["dms60"])  # its first residue: 1 (the default) in both
    scores = dms.score_dms(out["engine"], table, "masked-marginals", record_id="NEIME")
    metrics = dms_metrics(scores, model=MODEL)
    (o,) = out["engine"].run([table.wild_type], logits=True)
    subs = substitution_scores(log_softmax(o.logits.astype(np.float64)), table.wild_type)
    variants = dms.table_variants(table)[0][:20]
    return {"dms_scatter": dms_scatter(scores, metrics), "dms_scatter_singles": dms_scatter(scores, metrics, True),
            "dms_heatmaps": dms_heatmaps(scores),
            "variant_map": numbered(variant_map, subs, table.wild_type, variants, method="wt-marginals")}


def record_and_fit_figures(data: dict, out: dict) -> dict:
    """The record map (PCA of the records' means) and the Predict page's figures of a onehot fit on 60 rows."""
    from flamino_core.records.embedding_map import project, record_map_figure
    ids = [name for name, _ in data["records"]]
    projection = project(out["means"], "pca")
    figs = {"record_map": record_map_figure(projection, ids, selected=ids[0], title="records"),
            "record_map_coloured": record_map_figure(projection, ids, colour=[len(s) for _, s in data["records"]],
                                                     colour_name="length", found=ids[1:2])}
    table_mod = module("flamino_core.predictors.table", "flamino_core.predict.table")
    fit_mod = module("flamino_core.predictors.table_fit", "flamino_core.predictors.fit", "flamino_core.predict.fit")
    fig_mod = module("flamino_core.predictors.figures", "flamino_core.predict.figures")
    table = table_mod.parse_labelled_table(data["dms60"], "DMS_score")
    fit = fit_mod.fit_table(table, "onehot", engine=out["engine"], model=MODEL)
    figs.update(out_of_fold_scatter=fig_mod.out_of_fold_scatter(fit), comparison_bars=fig_mod.comparison_bars(fit),
                learning_curves=fig_mod.learning_curves(fit))
    wt = data["wild_type"][:40]
    grid = np.round(np.sin(np.arange(len(wt) * 20, dtype=np.float64)).reshape(len(wt), 20), 6)  # fixed values
    return {**figs, **both("prediction_map", fig_mod.prediction_map, grid, wt, 0.25, target="DMS_score",
                           task="regression")}


def checkout_only() -> None:
    """Import the checkout's code only: the venv's editable install of /work/main adds an import finder that
    answers for modules the checkout lacks (the base has no flamino_core.predictors: it would come from main)."""
    sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
    import flamino_core
    root = Path(os.environ["PYTHONPATH"]).resolve()
    if not Path(flamino_core.__file__).resolve().is_relative_to(root):
        sys.exit(f"flamino_core came from {flamino_core.__file__}, not {root}")


def build(out_dir: Path) -> int:
    """In the checkout's interpreter: every figure's JSON and the manifest."""
    checkout_only()
    data = inputs()
    out = model_outputs(data)
    figs = {k: v for part in (sequence_figures, structure_figures, dms_figures, record_and_fit_figures)
            for k, v in part(data, out).items()}
    out_dir.mkdir(parents=True)
    manifest = {}
    for name, fig in sorted(figs.items()):
        text = fig.to_json()
        (out_dir / f"{name}.json").write_text(text)
        manifest[name] = hashlib.sha256(text.encode()).hexdigest()
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"{len(figs)} figures into {out_dir}")
    return 0


def run(checkout: Path, out: Path, python: str, kernel: str | None) -> int:
    if out.exists():
        sys.exit(f"{out} exists: give a new output folder")
    if kernel:  # the compiled kernel is not in git: a fresh worktree runs pure JAX without it
        shutil.copy2(kernel, checkout / "flamino_core" / "model" / Path(kernel).name)
    with tempfile.TemporaryDirectory(prefix="flamino_cache_") as cache:
        env = {**os.environ, "PYTHONPATH": str(checkout), "HF_HUB_OFFLINE": "1", "FLAMINO_CACHE": cache}
        return subprocess.run([python, str(Path(__file__).resolve()), "build", str(out)], cwd=checkout,
                              env=env).returncode


def walk(a, b, path: str, found: dict) -> None:
    """Both JSON trees side by side: the first path where they differ, the largest numeric difference."""
    a, b = (decoded(x) for x in (a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            walk(a.get(key, "<absent>"), b.get(key, "<absent>"), f"{path}.{key}", found)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, f"{path}[{i}]", found)
    elif a != b and not (a != a and b != b):  # NaN == NaN here
        found.setdefault("first", f"{path}: {str(a)[:80]!r} vs {str(b)[:80]!r}")
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b)):
            if not abs(a - b) <= found.get("largest", (-1.0,))[0]:  # inf or NaN where one is not finite
                found["largest"] = (abs(a - b), path)
        else:
            found["other"] = found.get("other", 0) + 1


def decoded(node):
    """Plotly's typed arrays ({"dtype", "bdata"[, "shape"]}: numpy arrays in base64) as lists; other nodes as is."""
    if not (isinstance(node, dict) and "bdata" in node and "dtype" in node):
        return node
    array = np.frombuffer(base64.b64decode(node["bdata"]), dtype=node["dtype"]).astype(np.float64)
    return array.reshape([int(n) for n in str(node["shape"]).split(",")] if "shape" in node else -1).tolist()


def difference(ta: str, tb: str) -> str:
    """Where two figures' JSON first differ (character offset and JSON path) and the largest numeric difference."""
    i = next((k for k, (x, y) in enumerate(zip(ta, tb)) if x != y), min(len(ta), len(tb)))
    found: dict = {}
    walk(json.loads(ta), json.loads(tb), "fig", found)
    largest = f"{found['largest'][0]:.3g} at {found['largest'][1]}" if "largest" in found else "none"
    return (f"first at character {i}: {ta[max(0, i - 50):i + 50]!r}\n      vs {tb[max(0, i - 50):i + 50]!r}\n"
            f"    first differing value {found.get('first')}\n    largest numeric difference {largest}; "
            f"non-numeric values differing: {found.get('other', 0)}")


def compare(a: Path, b: Path) -> int:
    """Per figure; where the JSON first differs and the largest numeric difference."""
    from cli_outputs import compare_manifests  # the same manifests, the same report

    def describe(name: str) -> str:
        ta, tb = ((d / f"{name}.json").read_text() for d in (a, b))
        return f": {difference(ta, tb)}"

    return compare_manifests(a, b, "figures", describe)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("run", help="build the figures of CHECKOUT into OUT (a new folder)")
    r.add_argument("--python", default=sys.executable, help="interpreter (default: this one)")
    r.add_argument("--kernel", help="a built _attention_cpu*.so to copy into the checkout first")
    b = sub.add_parser("build", help="(run calls it) build into OUT with the checkout on PYTHONPATH")
    c = sub.add_parser("compare", help="compare two run folders")
    for command, names in ((r, ("checkout", "out")), (b, ("out",)), (c, ("a", "b"))):
        for name in names:
            command.add_argument(name, type=Path)
    args = parser.parse_args()
    if args.mode == "compare":
        return compare(args.a, args.b)
    if args.mode == "build":
        return build(args.out.resolve())
    return run(args.checkout.resolve(), args.out.resolve(), args.python, args.kernel)


if __name__ == "__main__":
    sys.exit(main())
