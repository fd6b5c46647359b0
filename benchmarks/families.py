"""Speed per model family against its transformers reference, on the same random weights.

For each family (ESM-2, ESM-1b, ESM C, SaProt) one shape of six layers, 320 wide (ESM C: 64-wide heads,
as published), random weights written by transformers itself (tests/reference_checkpoints.py,
tests/family_checkpoints.py) into a folder that both systems load: flamino with
``load_weights(dir)`` + ``Engine``, transformers with ``from_pretrained(dir)`` (fp32, its default
SDPA attention, ``torch.inference_mode()``). The workload: the real proteins of
../shared/fasta/uniprot_two.fa and HBB_HUMAN.fa (SaProt: each residue with the 3Di letter ``#``,
as without a structure, tokenized by transformers' ``EsmTokenizer`` from SaProt's vocabulary),
one padded batch for transformers, logits and
the final hidden state; the median of ``--reps`` timed runs after one warm-up (flamino's compile
is in the warm-up). Prints a Markdown table (docs/benchmarks.md, "Speed per family").

    .venv/bin/python benchmarks/families.py [--reps 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def median_seconds(run, reps: int) -> float:
    run()  # warm-up: flamino compiles here
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("FLAMINO_CACHE", tempfile.mkdtemp(prefix="flamino-bench-"))
    import torch
    from transformers import AutoModelForMaskedLM

    from family_checkpoints import esm1b_config, make_hf_esm1b, make_hf_esmc
    from flamino_core import Engine, load_weights
    from flamino_core.alphabet import batch_encode
    from flamino_core.inputs.fasta import read_fasta
    from flamino_core.model.config import ModelConfig
    from reference_checkpoints import make_hf_model, randomize_
    from transformers import EsmConfig, EsmForMaskedLM, EsmTokenizer

    from flamino_core.model import saprot

    shared = ROOT.parent / "shared" / "fasta"
    seqs = [r.sequence for name in ("HBB_HUMAN.fa", "uniprot_two.fa") for r in read_fasta(shared / name).records]
    made = {
        "ESM-2": make_hf_model(ModelConfig.preset("esm2_t6_8M_UR50D"), seed=0),
        "ESM-1b": make_hf_esm1b(esm1b_config("esm1b", 6, 320, 20), seed=0),
        "ESM C": make_hf_esmc(ModelConfig.esmc(6, 320, 5), seed=0),
        "SaProt": EsmForMaskedLM(EsmConfig(**ModelConfig(
            num_layers=6, embed_dim=320, attention_heads=20, ffn_dim=1280, vocab_size=446, name="saprot-t6",
            family="saprot").to_hf_config())).eval(),
    }
    randomize_(made["SaProt"], 0)
    saprot_tokenizer = EsmTokenizer(vocab_file=str(saprot.VOCAB_FILE))
    saprot_batch = saprot_tokenizer(["".join(f"{aa}#" for aa in s) for s in seqs], padding=True, return_tensors="pt")
    tokens = torch.as_tensor(batch_encode(seqs), dtype=torch.long)
    mask = (tokens != 1).long()
    print(f"{len(seqs)} proteins ({', '.join(str(len(s)) for s in seqs)} residues), 6 layers x 320, "
          f"{torch.get_num_threads()} torch threads, median of {args.reps}\n")
    print("| family | flamino (s) | transformers (s) | transformers / flamino |")
    print("|---|---|---|---|")
    for title, model in made.items():
        folder = Path(tempfile.mkdtemp(prefix="bench-family-"))
        model.save_pretrained(folder)
        if title == "SaProt":  # its folder is recognised by its 446-token vocabulary
            saprot_tokenizer.save_pretrained(folder)
        ids, attention = ((saprot_batch["input_ids"], saprot_batch["attention_mask"]) if title == "SaProt"
                          else (tokens, mask))
        engine = Engine(load_weights(str(folder)))
        reference = AutoModelForMaskedLM.from_pretrained(folder).eval()

        def ours():
            engine.run(seqs, repr_layers=(-1,))

        def theirs():
            with torch.inference_mode():
                reference(input_ids=ids, attention_mask=attention)

        a, b = median_seconds(ours, args.reps), median_seconds(theirs, args.reps)
        print(f"| {title} | {a:.3f} | {b:.3f} | {b / a:.1f}x |")


if __name__ == "__main__":
    main()
