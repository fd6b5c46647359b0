"""Map PyTorch state dicts onto our NNX state: ESM-2, ESM-1b and ESM-1v (HF Hub 2022,
transformers 5.x, fair-esm) and ESM C (transformers' ``EsmcForMaskedLM``; EvolutionaryScale's
``.pth`` through ``key_maps.esmc_from_evolutionaryscale``).

Every external key is first renamed to the model's attribute path (fair-esm's stripped names
for the ESM family, transformers' for ESM C), then placed into the model's nested state:
per-layer tensors are stacked on the
leading layer axis that ``nnx.vmap`` gave ``ESM2.layers``, and PyTorch ``Linear`` weights
(out, in) are transposed into Flax kernels (in, out).
"""

from __future__ import annotations

import functools
import re
from typing import Mapping

import numpy as np
from flax import nnx

from flamino_core.model.config import ModelConfig
from flamino_core.model.families import family_of
from flamino_core.weights.key_maps import esmc_from_evolutionaryscale, is_evolutionaryscale


class CheckpointMismatchError(ValueError):
    """A checkpoint does not fit the model: lists every missing, unexpected and misshapen key."""

    def __init__(self, source: str, missing=(), unexpected=(), mismatched=(), title: str = "ESM-2"):
        self.missing, self.unexpected, self.mismatched = list(missing), list(unexpected), list(mismatched)
        parts = [f"checkpoint {source} does not match the {title} architecture:"]
        if self.missing:
            parts.append(f"  missing keys ({len(self.missing)}): " + ", ".join(self.missing))
        if self.unexpected:
            parts.append(f"  unexpected keys ({len(self.unexpected)}): " + ", ".join(self.unexpected))
        if self.mismatched:
            parts.append(f"  shape mismatches ({len(self.mismatched)}): " + ", ".join(self.mismatched))
        super().__init__("\n".join(parts))


# HF (transformers) names -> fair-esm names; applied in order, each a full-match regex.
_HF_RULES: list[tuple[str, str]] = [
    (r"embeddings\.word_embeddings\.weight", "embed_tokens.weight"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.query\.(weight|bias)", r"layers.\1.self_attn.q_proj.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.key\.(weight|bias)", r"layers.\1.self_attn.k_proj.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.value\.(weight|bias)", r"layers.\1.self_attn.v_proj.\2"),
    # transformers 5.x saves one shared copy, as a literal "*" layer or at model level.
    (r"encoder\.layer\.(\d+|\*)\.attention\.self\.rotary_embeddings\.inv_freq",
     r"layers.\1.self_attn.rot_emb.inv_freq"),
    (r"rotary_embeddings\.inv_freq", "layers.*.self_attn.rot_emb.inv_freq"),
    (r"encoder\.layer\.(\d+)\.attention\.output\.dense\.(weight|bias)", r"layers.\1.self_attn.out_proj.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.LayerNorm\.(weight|bias)", r"layers.\1.self_attn_layer_norm.\2"),
    (r"encoder\.layer\.(\d+)\.intermediate\.dense\.(weight|bias)", r"layers.\1.fc1.\2"),
    (r"encoder\.layer\.(\d+)\.output\.dense\.(weight|bias)", r"layers.\1.fc2.\2"),
    (r"encoder\.layer\.(\d+)\.LayerNorm\.(weight|bias)", r"layers.\1.final_layer_norm.\2"),
    (r"encoder\.emb_layer_norm_after\.(weight|bias)", r"emb_layer_norm_after.\1"),
    # ESM-1b / ESM-1v: learned positions and the LayerNorm before the stack.
    (r"embeddings\.position_embeddings\.weight", "embed_positions.weight"),
    (r"embeddings\.layer_norm\.(weight|bias)", r"emb_layer_norm_before.\1"),
    (r"contact_head\.regression\.(weight|bias)", r"contact_head.regression.\1"),
    (r"lm_head\.decoder\.weight", "lm_head.weight"),
    (r"lm_head\.decoder\.bias", "lm_head.decoder_bias"),
    (r"lm_head\.(dense|layer_norm)\.(weight|bias)", r"lm_head.\1.\2"),
    (r"lm_head\.bias", "lm_head.bias"),
]
_HF_RULES_COMPILED = [(re.compile(p), r) for p, r in _HF_RULES]

# Buffers that carry no weights (HF position ids; fair-esm's version counters).
_IGNORED = re.compile(r"(esm\.)?embeddings\.position_ids|.*\._float_tensor|.*version")


def canonical_name(key: str) -> str | None:
    """fair-esm's stripped name for any known key spelling, or None for ignorable buffers."""
    if _IGNORED.fullmatch(key):
        return None
    # transformers >= 5 writes LayerNorm parameters as gamma/beta.
    key = re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", key))
    # fair-esm .pt: encoder.sentence_encoder.* and encoder.lm_head.* (as its upgrade_state_dict).
    for prefix in ("encoder.sentence_encoder.", "encoder."):
        if key.startswith(prefix) and not key.startswith("encoder.layer."):
            key = key[len(prefix):]
            return key
    hf_key = key[len("esm."):] if key.startswith("esm.") else key
    for pattern, repl in _HF_RULES_COMPILED:
        if pattern.fullmatch(hf_key):
            return pattern.sub(repl, hf_key)
    return key  # already fair-esm style (stripped), or unknown: judged below


_LAYER_KEY = re.compile(r"layers\.(\d+|\*)\.(.+)")
_LINEAR_WEIGHT = re.compile(r".*(proj|fc1|fc2|dense|regression|decoder)\.weight")


def _target_path(name: str) -> tuple[tuple[str, ...], bool]:
    """Our state path for a fair-esm parameter name (without the layer index), and whether the
    value is a torch Linear weight to transpose."""
    parts = name.split(".")
    leaf = parts[-1]
    is_linear = bool(_LINEAR_WEIGHT.fullmatch(name))
    if name in ("embed_tokens.weight", "embed_positions.weight"):
        return (parts[0], "embedding"), False
    if leaf == "weight":
        parent = parts[-2]
        leaf = "scale" if "norm" in parent else "kernel"
    return tuple(parts[:-1]) + (leaf,), is_linear


def state_dict_to_params(
    state_dict: Mapping[str, np.ndarray], config: ModelConfig, source: str = "checkpoint"
) -> dict:
    """Convert a PyTorch-style state dict into a pure nested dict for ``ESM2``'s state.

    Args:
      state_dict: name -> array (NumPy, float), in any supported key spelling.
      config: the architecture the weights must fit.
      source: where the weights came from, for error messages.

    Returns:
      A nested dict matching ``nnx.to_pure_dict`` of an ``ESM2(config)`` (params and buffers).

    Raises:
      CheckpointMismatchError: listing every missing, unexpected and misshapen key at once.
    """
    expected = expected_params(config)
    n = config.num_layers
    family = family_of(config)
    if is_evolutionaryscale(state_dict):
        state_dict = esmc_from_evolutionaryscale(state_dict)
    canonical, original = _canonical_arrays(state_dict, family.id == "esmc")
    unexpected = _untie_lm_head(canonical) if family.tied_lm_head else []
    if not family.contact_head:  # HF's ESM-1v folders carry an untrained one; nothing reads it
        for name in [k for k in canonical if k.startswith("contact_head.")]:
            del canonical[name]
    flat, origin, per_layer = _place_by_path(canonical, original, n)
    expected_shapes = {path: tuple(leaf.shape) for path, leaf in param_leaves(expected)}
    missing, mismatched, extra_layers = _stack_layers(per_layer, expected_shapes, n, flat)
    params, absent, misshapen = _fill_expected(expected, flat, per_layer, config)
    missing += absent
    mismatched += misshapen
    unexpected += extra_layers
    unexpected += [origin.get(p, _describe(p)) for p in flat if p not in expected_shapes]
    if missing or unexpected or mismatched:
        raise CheckpointMismatchError(source, sorted(set(missing)), sorted(unexpected), mismatched, family.title)
    return params


def _canonical_arrays(state_dict: Mapping[str, np.ndarray], hf_names: bool = False):
    """(canonical name -> float32 array, canonical name -> the key as the checkpoint spells it),
    ignorable buffers dropped. ``hf_names``: the model's attributes are transformers' names
    (ESM C): only the ``esmc.`` prefix goes."""
    canonical: dict[str, np.ndarray] = {}
    original: dict[str, str] = {}
    for key, value in state_dict.items():
        name = key.removeprefix("esmc.") if hf_names else canonical_name(key)
        if name is not None:
            canonical[name] = np.asarray(value, dtype=np.float32)
            original[name] = key
    return canonical, original


def _untie_lm_head(canonical: dict[str, np.ndarray]) -> list[str]:
    """Drop the LM decoder's stored weight and move its bias to ``lm_head.bias`` (in place);
    returns the unexpected keys this finds."""
    unexpected: list[str] = []
    # The LM decoder is tied to the token embedding: accept a stored copy only if it is the same.
    tied = canonical.pop("lm_head.weight", None)
    if tied is not None and "embed_tokens.weight" in canonical:
        if tied.shape != canonical["embed_tokens.weight"].shape or not np.array_equal(
            tied, canonical["embed_tokens.weight"]
        ):
            unexpected.append("lm_head.decoder.weight (differs from the tied token embedding)")
    decoder_bias = canonical.pop("lm_head.decoder_bias", None)
    if decoder_bias is not None and "lm_head.bias" not in canonical:
        canonical["lm_head.bias"] = decoder_bias
    return unexpected


def _place_by_path(canonical: dict[str, np.ndarray], original: dict[str, str], n: int):
    """Sort canonical tensors onto our state paths, Linear weights transposed.

    Returns (flat: path -> array for model-level tensors, origin: path -> checkpoint key,
    per_layer: ("layers", ...) path -> {layer index: array}) for the layer stack to assemble.
    """
    flat: dict[tuple[str, ...], np.ndarray] = {}
    origin: dict[tuple[str, ...], str] = {}
    per_layer: dict[tuple[str, ...], dict[int, np.ndarray]] = {}
    for name, value in canonical.items():
        layer_match = _LAYER_KEY.fullmatch(name)
        inner = layer_match.group(2) if layer_match else name
        path, transpose = _target_path(inner)
        if transpose:
            value = value.T
        if layer_match and layer_match.group(1) == "*":  # one tensor shared by every layer
            per_layer.setdefault(("layers",) + path, {}).update({i: value for i in range(n)})
        elif layer_match:
            per_layer.setdefault(("layers",) + path, {})[int(layer_match.group(1))] = value
        else:
            flat[path] = value
            origin[path] = original[name]
    return flat, origin, per_layer


def _stack_layers(per_layer, expected_shapes, n: int, flat: dict):
    """Stack each complete, well-shaped per-layer tensor on the leading layer axis into ``flat``
    (in place).

    Returns (missing, mismatched, unexpected) key descriptions.
    """
    missing: list[str] = []
    mismatched: list[str] = []
    unexpected: list[str] = []
    for path, layers in per_layer.items():
        name = ".".join(path[1:])
        if path not in expected_shapes:
            unexpected += [f"layers.{i}.{name}" for i in sorted(layers)]
            continue
        absent = [i for i in range(n) if i not in layers]
        unexpected += [f"layers.{i}.{name}" for i in sorted(layers) if i >= n]
        if path[-1] == "inv_freq" and absent and layers:
            # transformers 5.x stores inv_freq once; every layer shares it.
            layers = {i: layers.get(i, layers[min(layers)]) for i in range(n)}
            absent = []
        missing += [f"layers.{i}.{name}" for i in absent]
        want = expected_shapes[path][1:]
        bad = [i for i in range(n) if i in layers and tuple(layers[i].shape) != want]
        mismatched += [f"layers.{i}.{name}: checkpoint {tuple(layers[i].shape)} vs model {want}" for i in bad]
        if not absent and not bad:
            # Filled layer by layer into a C-ordered array: np.stack of transposed (F-ordered)
            # kernels is F-ordered, and every later reader (the cache's writer, device_put) then
            # made a C-ordered copy: ESM C 6B's 25.4 GB held twice.
            stacked = np.empty((n, *want), np.float32)
            for i in range(n):
                stacked[i] = layers[i]
            flat[path] = stacked
    return missing, mismatched, unexpected


def _fill_expected(expected: dict, flat, per_layer, config: ModelConfig):
    """(params, missing, mismatched): the nested params dict holding every leaf the model
    expects, taken from ``flat``, and what is absent or misshapen there."""
    params: dict = {}
    missing: list[str] = []
    mismatched: list[str] = []
    for path, leaf in param_leaves(expected):
        value = flat.get(path)
        if value is None:
            if path[-1] == "inv_freq":
                # Not stored (some re-saved files): recompute as the references then do.
                value = _default_inv_freq(config)
            else:
                if path not in per_layer:  # partly present per-layer tensors are listed above
                    missing.append(_describe(path))
                continue
        elif tuple(value.shape) != tuple(leaf.shape):
            mismatched.append(f"{_describe(path)}: checkpoint {tuple(value.shape)} vs model {tuple(leaf.shape)}")
        node = params
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return params, missing, mismatched


def param_leaves(tree: dict, prefix: tuple[str, ...] = ()):
    """(path of string keys, leaf) for every leaf of a nested parameter dict."""
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from param_leaves(value, prefix + (str(key),))
        else:
            yield prefix + (str(key),), value


def _default_inv_freq(config: ModelConfig) -> np.ndarray:
    head_dim = config.head_dim
    exponents = np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)
    inv = (1.0 / (np.float32(config.rotary_base) ** exponents)).astype(np.float32)
    return np.broadcast_to(inv, (config.num_layers, head_dim // 2)).copy()


def _describe(path: tuple[str, ...]) -> str:
    if path[0] == "layers":
        return "layers.*." + ".".join(path[1:])
    return ".".join(path)


@functools.lru_cache(maxsize=8)
def abstract_network(network, config):
    """(graphdef, state of shapes) of ``network(config, rngs)``, built once per network, config and
    process: tracing a constructor (``nnx.eval_shape``) is a tenth of a second or more of a start.
    Every family's network and ESMFold's and ESMFold2's are built from their parameters here."""
    return nnx.split(nnx.eval_shape(lambda: network(config, nnx.Rngs(0))))


def network_shapes(network, config) -> dict:
    """``network``'s parameters as a pure nested dict of ``jax.ShapeDtypeStruct`` (no arrays)."""
    return nnx.to_pure_dict(abstract_network(network, config)[1])


def network_holding(network, params: dict, config):
    """``network(config)`` holding ``params`` (a pure nested dict as ``network_shapes`` returns)."""
    import jax

    graphdef, abstract = abstract_network(network, config)
    state = jax.tree.map(lambda leaf: leaf, abstract)  # a copy: replace_by_pure_dict updates it in place
    nnx.replace_by_pure_dict(state, params)
    return nnx.merge(graphdef, state)


def expected_params(config: ModelConfig) -> dict:
    """The model's parameters as a pure nested dict of ``jax.ShapeDtypeStruct`` (no arrays)."""
    return network_shapes(family_of(config).network_class(), config)  # imports jax: the helpers above do not


def params_to_model(params: dict, config: ModelConfig):
    """Build the config's network holding ``params`` (a pure nested dict as returned above)."""
    return network_holding(family_of(config).network_class(), params, config)
