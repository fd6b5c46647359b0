"""ESMFold checkpoints: a folder written by transformers' ``EsmForProteinFolding.save_pretrained``
(``config.json`` + ``model.safetensors``, its key names) into ``model.esmfold.ESMFold``.

The stem (``esm.*``) goes through the language models' converter (``convert.state_dict_to_params``,
the same key spellings and the shared rotary ``inv_freq``); every other key names its module the
way our attributes do, except the reference's ``nn.Sequential`` indices (``mlp.0``/``.1``/``.3``,
``lddt_head.0``..``.3``, ``esm_s_mlp.0``/``.1``/``.3``), renamed here. Strict: every missing,
unexpected and misshapen key is listed in one error, and a checkpoint of another shape than
the one asked for is refused naming the fields that differ.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Mapping

import numpy as np
from flax import nnx

from flamino_core.model.esmfold.config import STEM_PRECISIONS, FoldConfig
from flamino_core.model.model_id import RANDOM_FOLD_MODELS, ModelId
from flamino_core.options import FoldPrecision, Precision
from flamino_core.weights.convert import CheckpointMismatchError, network_holding, network_shapes
from flamino_core.weights.convert import state_dict_to_params as language_model_params

TITLE = "ESMFold"
_SEQUENTIAL = [
    (re.compile(r"(mlp_(?:seq|pair))\.mlp\.([013])\.(.*)"), {"0": "norm", "1": "fc1", "3": "fc2"}),
    (re.compile(r"(esm_s_mlp)\.([013])\.(.*)"), {"0": "norm", "1": "fc1", "3": "fc2"}),
    (re.compile(r"(lddt_head)\.([0-3])\.(.*)"), {"0": "norm", "1": "linear_1", "2": "linear_2", "3": "linear_3"}),
]
_BLOCK = re.compile(r"trunk\.blocks\.(\d+)\.(.+)")


def expected_params(config: FoldConfig) -> dict:
    """The model's state as a pure nested dict of shapes (no arrays)."""
    from flamino_core.model.esmfold.model import ESMFold

    return network_shapes(ESMFold, config)


def params_to_model(params: dict, config: FoldConfig):
    from flamino_core.model.esmfold.model import ESMFold

    return network_holding(ESMFold, params, config)


def _module_path(key: str) -> tuple[str, ...]:
    """Our attribute path of a (non-stem) checkpoint key, its last part the torch leaf."""
    for pattern, names in _SEQUENTIAL:
        match = pattern.fullmatch(key)
        if match:
            key = f"{match.group(1)}.{names[match.group(2)]}.{match.group(3)}"
    return tuple(int(p) if p.isdigit() else p for p in key.split("."))


_TORCH_LEAF = {"kernel": "weight", "scale": "weight", "embedding": "weight"}
_MLP_NAMES = {"0": "norm", "1": "fc1", "3": "fc2"}
_LDDT_NAMES = {"0": "norm", "1": "linear_1", "2": "linear_2", "3": "linear_3"}
_SEQUENTIAL_BACK = [(re.compile(rf"(^|\.)({owner})\.({'|'.join(names.values())})\."), owner, names)
                    for owner, names in (("mlp_seq", _MLP_NAMES), ("mlp_pair", _MLP_NAMES),
                                         ("esm_s_mlp", _MLP_NAMES), ("lddt_head", _LDDT_NAMES))]


def checkpoint_key(path: tuple) -> str:
    """How the checkpoint spells one of our leaves: ``("lddt_head", "linear_2", "kernel")`` is
    ``lddt_head.2.weight`` (for messages: a missing key is named as the file would hold it)."""
    key = ".".join(map(str, path[:-1] + (_TORCH_LEAF.get(path[-1], path[-1]),)))
    for pattern, owner, names in _SEQUENTIAL_BACK:
        index = {name: i for i, name in names.items()}
        inner = ".mlp" if owner.startswith("mlp_") else ""
        key = pattern.sub(lambda m: f"{m.group(1)}{owner}{inner}.{index[m.group(3)]}.", key)
    return key


def _place(path: tuple, value: np.ndarray, shapes: dict[tuple, tuple]) -> tuple[tuple, np.ndarray] | None:
    """(our leaf path, value) for a torch leaf: ``weight`` is a Linear kernel (transposed), a
    LayerNorm scale or an embedding table, whichever the model has there; None if none."""
    module, leaf = path[:-1], path[-1]
    if leaf == "weight":
        for ours, transpose in (("kernel", True), ("scale", False), ("embedding", False)):
            if module + (ours,) in shapes:
                return module + (ours,), (value.T if transpose else value)
        return None
    return (path, value) if path in shapes else None


def _stem_params(state_dict: Mapping[str, np.ndarray], config: FoldConfig, source: str):
    """(stem params, missing, unexpected, mismatched): the language models' converter on the
    ``esm.`` keys. It expects an LM head, which ESMFold's stem lacks: zeros stand in for it and
    are dropped from the result (no checkpoint value is ever replaced by them)."""
    stem = {k: v for k, v in state_dict.items() if k.startswith("esm.")}
    dim, vocab = config.stem.embed_dim, config.stem.vocab_size
    stand_in = {"lm_head.dense.weight": np.zeros((dim, dim), np.float32),
                "lm_head.dense.bias": np.zeros(dim, np.float32),
                "lm_head.layer_norm.weight": np.ones(dim, np.float32),
                "lm_head.layer_norm.bias": np.zeros(dim, np.float32),
                "lm_head.bias": np.zeros(vocab, np.float32)}
    try:
        params = language_model_params({**stem, **stand_in}, config.stem, source)
    except CheckpointMismatchError as error:
        prefix = lambda names: [f"esm.{n}" for n in names]  # noqa: E731
        return None, prefix(error.missing), prefix(error.unexpected), prefix(error.mismatched)
    params.pop("lm_head")
    return params, [], [], []


def _check_af2_to_esm(value: np.ndarray) -> list[str]:
    from flamino_core.alphabet import PAD_IDX
    from flamino_core.model.esmfold.model import AF2_TO_ESM

    want = np.concatenate([[PAD_IDX], AF2_TO_ESM])
    if np.shape(value) != want.shape or not np.array_equal(np.asarray(value), want):
        return [f"af2_to_esm: maps residues to {np.asarray(value).tolist()}, not ESM-2's tokens {want.tolist()}"]
    return []


def state_dict_to_params(state_dict: Mapping[str, np.ndarray], config: FoldConfig, source: str = "checkpoint") -> dict:
    """Convert an ``EsmForProteinFolding`` state dict into ``ESMFold(config)``'s pure state dict.

    Raises:
      CheckpointMismatchError: every missing, unexpected and misshapen key at once.
    """
    expected = expected_params(config)
    shapes = {path: tuple(leaf.shape) for path, leaf in _leaves(expected) if path[0] != "esm"}
    stem, missing, unexpected, mismatched = _stem_params(state_dict, config, source)
    if "af2_to_esm" in state_dict:
        mismatched += _check_af2_to_esm(state_dict["af2_to_esm"])
    flat, per_block = {}, {}
    for key, value in state_dict.items():
        if key.startswith("esm.") or key == "af2_to_esm":
            continue
        block = _BLOCK.fullmatch(key)
        path = _module_path(block.group(2) if block else key)
        placed = _place(("trunk", "blocks") + path if block else path, np.asarray(value, np.float32), shapes)
        if placed is None:
            unexpected.append(key)
        elif block:
            per_block.setdefault(placed[0], {})[int(block.group(1))] = placed[1]
        else:
            flat[placed[0]] = placed[1]
    _stack_blocks(per_block, config.trunk.num_blocks, flat, missing, unexpected, mismatched)
    params = {"esm": stem} if stem is not None else {}
    for path, shape in shapes.items():
        if path not in flat:
            if path not in per_block:  # a block tensor present in some blocks is listed per block above
                missing.append(_describe(path))
        elif flat[path].shape != shape:
            mismatched.append(f"{_describe(path)}: checkpoint {flat[path].shape} vs model {shape}")
        else:
            _set(params, path, flat[path])
    if missing or unexpected or mismatched:
        raise CheckpointMismatchError(source, sorted(missing), sorted(unexpected), mismatched, TITLE)
    return params


def _stack_blocks(per_block: dict, n: int, flat: dict, missing: list, unexpected: list, mismatched: list) -> None:
    """Stack each trunk block's tensors on the leading block axis (``nnx.vmap``'s) into ``flat``."""
    for path, blocks in per_block.items():
        name = checkpoint_key(path[2:])
        unexpected += [f"trunk.blocks.{i}.{name}" for i in sorted(blocks) if i >= n]
        absent = [i for i in range(n) if i not in blocks]
        missing += [f"trunk.blocks.{i}.{name}" for i in absent]
        shapes = {i: blocks[i].shape for i in range(n) if i in blocks}
        if len(set(shapes.values())) > 1:
            first = min(shapes)
            mismatched += [f"trunk.blocks.{i}.{name}: {shape} in block {i}, {shapes[first]} in block {first}"
                           for i, shape in shapes.items() if shape != shapes[first]]
        elif not absent:
            flat[path] = np.stack([blocks[i] for i in range(n)])


def _describe(path: tuple) -> str:
    """A leaf of ours as the checkpoint names it; a stacked block tensor as ``trunk.blocks.*.<name>``."""
    if path[:2] == ("trunk", "blocks"):
        return "trunk.blocks.*." + checkpoint_key(path[2:])
    return checkpoint_key(path)


def _leaves(tree: dict, prefix: tuple = ()):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _leaves(value, prefix + (key,))
        else:
            yield prefix + (key,), value


def _set(tree: dict, path: tuple, value: np.ndarray) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def load_esmfold(folder: Path | str, expect: FoldConfig | None = None):
    """The ``ESMFold`` model of a ``save_pretrained`` folder (``config.json`` + ``model.safetensors``).

    Args:
      folder: the folder.
      expect: the shape the checkpoint must have (``FoldConfig.esmfold_v1()`` for the published
        model); None takes the folder's own.

    Raises:
      ValueError: not an ESMFold folder, or a shape other than ``expect`` (the fields named).
      CheckpointMismatchError: the tensors do not fit the config (every key listed).
    """
    from safetensors.numpy import load_file

    folder = Path(folder)
    config_path, weights_path = folder / "config.json", folder / "model.safetensors"
    if not config_path.exists() or not weights_path.exists():
        raise ValueError(f"{folder} is not an ESMFold folder: expected config.json and model.safetensors "
                         "(as EsmForProteinFolding.save_pretrained writes them)")
    config = FoldConfig.from_hf_config(json.loads(config_path.read_text()), name=folder.name)
    if expect is not None and (differences := expect.differences(config)):
        raise ValueError(f"{folder} holds an ESMFold of another shape than {expect.name}: " + "; ".join(differences))
    params = state_dict_to_params(load_file(str(weights_path)), config, str(folder))
    return params_to_model(params, config)


def _check_stem_precision(stem_precision: str) -> None:
    if stem_precision not in STEM_PRECISIONS:
        raise ValueError(f"stem precision {stem_precision!r}: choose one of {', '.join(STEM_PRECISIONS)}")


def with_stem_precision(model, stem_precision: str):
    """``model`` with its stem's dense layers in ``stem_precision`` (``STEM_PRECISIONS``): the mode
    its stem's engine runs (``engine/fold.py``, the language models' bf16 mode), the kernels stored
    rounded here whatever the machine (the memory is the point: the fold holds the trunk beside)."""
    _check_stem_precision(stem_precision)
    if stem_precision == Precision.BF16:
        from flamino_core.model.precision import use_bf16_matmuls

        use_bf16_matmuls(model.esm, store_bf16=True)
    model.stem_precision = stem_precision
    return model



def with_fold_precision(model, fold_precision: FoldPrecision):
    """``model`` in ``fold_precision``: ``FAST`` (opt-in, labelled) puts every dense layer of the
    trunk's blocks on bf16 operands with fp32 accumulation (``model.precision.use_bf16_matmuls``, the
    language models' mode; kernels kept fp32 and rounded in the product: the trunk is 0.7% of
    esmfold_v1's weights), the triangular updates' and the attentions' einsums likewise
    (``bf16_products``), and the stem in the engine's bf16 mode (``with_stem_precision``). The
    layer norms, gates, softmax, residual adds, the structure module and the heads stay fp32: the
    coordinates and the confidences are made in fp32 from a trunk whose products were rounded."""
    if fold_precision not in tuple(FoldPrecision):
        raise ValueError(f"fold precision {fold_precision!r}: choose one of {', '.join(FoldPrecision)}")
    if fold_precision == FoldPrecision.FAST:
        from flamino_core.model.precision import use_bf16_matmuls

        use_bf16_matmuls(model.trunk.blocks)
        for _, module in nnx.iter_modules(model.trunk.blocks):
            if hasattr(module, "bf16_products"):
                module.bf16_products = True
        if model.stem_precision == Precision.FP32:
            with_stem_precision(model, Precision.BF16)
    model.fold_precision = FoldPrecision(fold_precision)
    return model

def load_fold_model(model_id: ModelId, stem_precision: Precision = Precision.FP32,
                    fold_precision: FoldPrecision = FoldPrecision.FP32):
    """(model, is_random) for a model: a ``save_pretrained`` folder, or
    ``random:esmfold-tiny[:seed]``, an untrained test model (random weights: its structures are
    not biology), or ``esmfold_v1`` / ``facebook/esmfold_v1`` (the published model, downloaded
    into the Hub's cache and read from it; ``esmfold_hub.py``); its stem in ``stem_precision``, the
    whole fold in ``fold_precision`` (``FAST``: the stem in bf16 whatever ``stem_precision`` says).

    Raises:
      ValueError: an identifier that is neither, with what is accepted; an unknown precision.
    """
    _check_stem_precision(stem_precision)  # before any download
    model, is_random = _load_fold_model(model_id)
    return with_fold_precision(with_stem_precision(model, stem_precision), fold_precision), is_random


def _load_fold_model(model_id: ModelId):
    identifier = model_id.text
    if model_id.is_random and model_id.fold == "esmfold":
        from flamino_core.model.esmfold.model import ESMFold

        return ESMFold(FoldConfig.tiny(), nnx.Rngs(model_id.fold_seed)), True
    from flamino_core.weights.esmfold_hub import FOLD_PRESETS, as_fp32, fold_preset_folder

    if (preset := model_id.fold_preset) in FOLD_PRESETS:  # downloaded into the Hub's cache (esmfold_hub.py)
        # In fp32, from the Hub's cache (downloaded when missing; the published stem is fp16).
        return as_fp32(load_esmfold(fold_preset_folder(preset), expect=FOLD_PRESETS[preset].expect())), False
    if model_id.kind != "path" or not Path(identifier).is_dir():
        raise ValueError(f"{identifier!r} is not an ESMFold model: give esmfold_v1 (downloaded from the Hub), a "
                         "folder written by transformers' EsmForProteinFolding.save_pretrained, or "
                         f"{RANDOM_FOLD_MODELS['esmfold']}[:seed] (an untrained test model)")
    return load_esmfold(identifier), False
