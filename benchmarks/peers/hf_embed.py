"""What an HF transformers user runs for ``flamino embed``: FASTA in, NPZ out (``make bench``'s
whole-process rows time this script from start to exit).

    python benchmarks/peers/hf_embed.py IN.fa MODEL_DIR OUT.npz [--include mean,per_tok,logits]

Written the way the transformers documentation shows ``EsmForMaskedLM``, fp32, with the same
batching as the benchmark's HF rows (sorted by length, batches up to 8192 tokens) and the same
NPZ keys as ``flamino embed`` (``mean/{i}``, ``per_tok/{i}``, ``logits/{i}``). Tokens come from
the fixed ESM-2 alphabet written out below (the benchmark's checkpoints carry no tokenizer
files, and the alphabet is all ``EsmTokenizer`` does for plain protein letters).
"""

from __future__ import annotations

import numpy as np
from peer_cli import parse_arguments
import torch
from transformers import EsmForMaskedLM

# fair-esm / HF ESM-2 vocabulary: <cls>=0, <pad>=1, <eos>=2, then the residue letters from 4.
ALPHABET = {letter: i for i, letter in enumerate("LAGVSERTIDPKQNFYMHWCXBUZO", start=4)}
TOKEN_BUDGET = 8192


def main() -> None:
    args, include, records = parse_arguments()
    model = EsmForMaskedLM.from_pretrained(args.model).eval()
    order = sorted(range(len(records)), key=lambda i: len(records[i][1]))
    batches: list[list[int]] = []
    for i in order:  # greedy: rows x longest row within the token budget
        if batches and (len(batches[-1]) + 1) * (len(records[i][1]) + 2) <= TOKEN_BUDGET:
            batches[-1].append(i)
        else:
            batches.append([i])
    arrays = {"ids": np.array([r[0] for r in records]), "sequences": np.array([r[1] for r in records])}
    for rows in batches:
        width = max(len(records[i][1]) for i in rows) + 2
        ids = np.ones((len(rows), width), np.int64)  # <pad>
        for r, i in enumerate(rows):
            seq = records[i][1]
            ids[r, : len(seq) + 2] = [0, *(ALPHABET[a] for a in seq), 2]
        tokens = torch.from_numpy(ids)
        with torch.inference_mode():
            hidden = model.esm(input_ids=tokens, attention_mask=(tokens != 1).long()).last_hidden_state
            logits = model.lm_head(hidden) if "logits" in include else None
        for r, i in enumerate(rows):
            L = len(records[i][1])
            h = hidden[r, 1:L + 1].numpy()
            if "per_tok" in include:
                arrays[f"per_tok/{i}"] = h
            if "mean" in include:
                arrays[f"mean/{i}"] = h.mean(0)
            if logits is not None:
                arrays[f"logits/{i}"] = logits[r, 1:L + 1].numpy()
    np.savez(args.output, **arrays)


if __name__ == "__main__":
    main()
