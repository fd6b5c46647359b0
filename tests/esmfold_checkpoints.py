"""Random ESMFold checkpoints written by transformers' own ``EsmForProteinFolding.save_pretrained``
(small ``EsmFoldConfig``/``TrunkConfig``/``StructureModuleConfig`` shapes), their weights drawn
as reference_checkpoints.randomize_ draws them: every parameter away from its initial value
(the reference initialises many output layers at zero, which would leave whole paths untested),
at a scale that keeps the activations of order one.
"""

from __future__ import annotations

from pathlib import Path

import torch

from reference_checkpoints import randomize_

ESM_VOCAB = ["<cls>", "<pad>", "<eos>", "<unk>", *"LAGVSERTIDPKQNFYMHWCXBUZO.-", "<null_1>", "<mask>"]

# Small shapes with every head count and point count above one, so that a transposed or
# mis-split axis shows.
SMALL = dict(
    stem=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64),
    trunk=dict(num_blocks=2, sequence_state_dim=64, pairwise_state_dim=32, sequence_head_width=16,
               pairwise_head_width=8, position_bins=8, max_recycles=3),
    structure=dict(sequence_dim=48, pairwise_dim=24, ipa_dim=8, resnet_dim=16, num_heads_ipa=3, num_qk_points=2,
                   num_v_points=3, num_blocks=3),
    lddt_head_hid_dim=16,
)

# esmfold_v1's widths (stem 2560 with 40 heads, trunk 1024 / 128 with 32-wide heads, the structure
# module's defaults with its 8 iterations, 4 passes) at reduced depth: one stem layer, one block.
V1_WIDTHS = dict(
    stem=dict(hidden_size=2560, num_hidden_layers=1, num_attention_heads=40, intermediate_size=10240),
    trunk=dict(num_blocks=1, sequence_state_dim=1024, pairwise_state_dim=128, sequence_head_width=32,
               pairwise_head_width=32, position_bins=32, max_recycles=4),
    structure=dict(),
    lddt_head_hid_dim=128,
)


def hf_esmfold_config(shape: dict = SMALL, chunk_size: int | None = None):
    from transformers import EsmConfig

    trunk = dict(shape["trunk"], chunk_size=chunk_size, structure_module=shape["structure"])
    return EsmConfig(vocab_size=33, position_embedding_type="rotary", token_dropout=True, emb_layer_norm_before=False,
                     layer_norm_eps=1e-5, mask_token_id=32, pad_token_id=1, is_folding_model=True, vocab_list=ESM_VOCAB,
                     esmfold_config=dict(fp16_esm=False, lddt_head_hid_dim=shape["lddt_head_hid_dim"], trunk=trunk),
                     **shape["stem"])


def make_hf_esmfold(seed: int, shape: dict = SMALL, chunk_size: int | None = None):
    """An ``EsmForProteinFolding`` in fp32 with random weights fixed by ``seed``."""
    from transformers import EsmForProteinFolding

    torch.manual_seed(seed)
    model = EsmForProteinFolding(hf_esmfold_config(shape, chunk_size)).eval()
    randomize_(model, seed)
    return model


def write_hf_esmfold(model, directory: Path) -> Path:
    model.save_pretrained(directory)
    return directory


def hf_fold(model, sequence: str):
    """The reference's outputs for one sequence (``infer``: its default recycles), as NumPy."""
    from transformers.models.esm.openfold_utils import atom14_to_atom37

    with torch.no_grad():
        out = model.infer([sequence])
    numpy = {k: v.numpy() for k, v in out.items() if isinstance(v, torch.Tensor)}
    numpy["atom37"] = atom14_to_atom37(out["positions"][-1], out).numpy()
    return out, numpy
