"""What an esm.cpp user runs for ``flamino embed``: FASTA in, NPZ out (``make bench``'s
whole-process rows time this script from start to exit, with ``.venv-esmcpp``'s interpreter).

    python benchmarks/peers/esmcpp_embed.py IN.fa MODEL_DIR OUT.npz [--include mean,per_tok,logits]

esm.cpp's API from its README: ``Model.load_from_safetensors``, ``Tokenizer.encode`` and, for
embeddings, ``forward_with_hidden_states`` (logits plus every layer's hidden state; the last is
after the final LayerNorm, as HF's ``last_hidden_state``), one protein at a time: its packed
``forward_scheduled`` returns logits only.
"""

from __future__ import annotations

import esm_cpp
import numpy as np
from peer_cli import parse_arguments


def main() -> None:
    args, include, records = parse_arguments()
    model = esm_cpp.Model.load_from_safetensors(f"{args.model}/model.safetensors")
    tokenizer = esm_cpp.Tokenizer()
    arrays = {"ids": np.array([r[0] for r in records]), "sequences": np.array([r[1] for r in records])}
    for i, (_, seq) in enumerate(records):
        logits, hidden = model.forward_with_hidden_states(np.asarray(tokenizer.encode(seq), np.int32))
        h = hidden[-1][1:-1]
        if "per_tok" in include:
            arrays[f"per_tok/{i}"] = h
        if "mean" in include:
            arrays[f"mean/{i}"] = h.mean(0)
        if "logits" in include:
            arrays[f"logits/{i}"] = logits[1:-1]
    np.savez(args.output, **arrays)


if __name__ == "__main__":
    main()
