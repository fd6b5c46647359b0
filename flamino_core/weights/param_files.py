"""The parameters of a flamino checkpoint folder as one safetensors file, read in one piece.

A start from the cache reads every parameter, so reading is what a start waits for. The file
is the safetensors layout (an 8-byte little-endian header length, a JSON header naming each
tensor's dtype, shape and byte range, then the raw little-endian data), written by the
``safetensors`` library, which imports in milliseconds (Orbax, which flamino used before,
took about a sixth of a second to import and as long again to restore the 8M model). It is
read here with one ``readinto`` of the whole data section into one array whose views are the
tensors, rather than with that library's readers, which copy each tensor once more; that array
is placed so the tensors start on 64-byte boundaries, where JAX on CPU uses them in place (the
engine's state is then these arrays, not a second copy: ``_aligned_buffer``). Not
memory-mapped: the arrays would then change (or fault) if the file were rewritten in place
while in use, and the checksums would vouch for bytes read earlier than the ones used.

Integrity: a CRC-32 of each tensor's bytes, stored at save time beside the file (the
``source.json`` of the folder), is checked at every read, on all cores at once (``zlib.crc32``
releases the GIL): about 6 GB/s per core here, so 5 ms for the 8M model and about 0.2 s for
650M on two cores. CRC-32 detects every error burst up to 32 bits and all but 2^-32 of other
damage (bit rot, a truncated or partly overwritten file, a copy gone wrong); it is no defence
against someone who can write the cache on purpose (who could as well change the code). The
header is checked against the file's size and each tensor's byte range against its shape, so a
truncated or garbled file is refused before any data is read.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

SEPARATOR = "/"  # nested parameter dict keys joined into one tensor name: "layers/fc1/kernel"
_DTYPES = {"F32": np.dtype("<f4")}
ALIGN = 64  # bytes: where XLA on CPU takes a NumPy array's memory as it is (``_aligned_buffer``)


class ParamFileError(ValueError):
    """A parameter file that is damaged (unreadable, truncated, checksum mismatch)."""


def flatten(params: dict, prefix: str = "") -> dict[str, np.ndarray]:
    flat = {}
    for key, value in params.items():
        name = f"{prefix}{SEPARATOR}{key}" if prefix else str(key)
        if isinstance(value, dict):
            flat.update(flatten(value, name))
        else:
            flat[name] = np.ascontiguousarray(np.asarray(value, dtype=np.float32))
    return flat


def flatten_shapes(params: dict, prefix: str = "") -> dict[str, tuple[int, ...]]:
    """Each tensor's shape by its ``flatten`` name (arrays or ``jax.ShapeDtypeStruct``s)."""
    shapes = {}
    for key, value in params.items():
        name = f"{prefix}{SEPARATOR}{key}" if prefix else str(key)
        shapes.update(flatten_shapes(value, name) if isinstance(value, dict) else {name: tuple(value.shape)})
    return shapes


def unflatten(flat: dict[str, np.ndarray]) -> dict:
    params: dict = {}
    for name, value in flat.items():
        node = params
        *parents, leaf = name.split(SEPARATOR)
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return params


def write_params(path: Path, params: dict) -> dict[str, int]:
    """Write ``params`` (a nested dict of arrays) as float32 safetensors; returns each tensor's CRC-32.

    Written here, tensor by tensor from the arrays' own memory: safetensors' ``save_file`` first
    copies every tensor into bytes, which held the weights twice (ESM C 6B: 51 GB for 25.4 GB,
    more than a 40 GiB TPU host). The layout is the format's (a little-endian header length, the
    JSON header padded with spaces to 8 bytes, the tensors back to back in the header's order)."""
    flat = flatten(params)
    header: dict = {"__metadata__": {"format": "flamino-params"}}
    offset = 0
    for name, array in flat.items():
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(encoded)) + encoded)
        for array in flat.values():
            handle.write(memoryview(array.astype("<f4", copy=False)).cast("B"))
    return checksums(flat)


def checksums(flat: dict[str, np.ndarray]) -> dict[str, int]:
    """CRC-32 of each tensor's bytes, computed on all cores of this process."""
    names = list(flat)
    workers = max(1, min(len(names), len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1))
    with ThreadPoolExecutor(workers) as pool:
        crcs = pool.map(lambda n: zlib.crc32(memoryview(flat[n]).cast("B")), names)
        return dict(zip(names, crcs))


def read_params(path: Path, expected_crcs: dict[str, int]) -> dict:
    """The nested parameter dict of a file written by ``write_params`` (read-only arrays that
    share one buffer), each tensor's CRC-32 checked against ``expected_crcs``.

    Raises:
      ParamFileError: the file is truncated, its header garbled, a tensor is missing, extra or
        out of its range, or a checksum does not match.
    """
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        header, start = _header(handle, size, path)
        data = _aligned_buffer(size - start, header)
        if handle.readinto(memoryview(data)) != data.size:
            raise ParamFileError(f"{path.name} changed while it was read")
    data.flags.writeable = False
    flat = _tensors(header, data, path)
    if set(flat) != set(expected_crcs):
        missing, extra = sorted(set(expected_crcs) - set(flat)), sorted(set(flat) - set(expected_crcs))
        raise ParamFileError(f"{path.name}: tensors missing {missing} or not expected {extra}")
    actual = checksums(flat)
    bad = sorted(name for name in flat if actual[name] != expected_crcs[name])
    if bad:
        raise ParamFileError(f"{path.name}: checksum mismatch in {', '.join(bad)}")
    return unflatten(flat)


def map_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The float32 tensors of any safetensors file as read-only views of the file mapped into
    memory: a page is read when a tensor is touched, and the kernel may drop it again (it is the
    file's). Converting a published checkpoint then holds its converted copy, not the file's too:
    ESM C 6B's 25.4 GB would otherwise be in memory twice (the converted stack and the file's
    arrays; measured at its width, 2 layers: a peak of 1.96x the weights with safetensors' reader).

    Raises:
      ParamFileError: a truncated file, a garbled header, or a tensor not float32 (read those
        with safetensors' own reader).
    """
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        header, start = _header(handle, size, path)
    if size == start:  # np.memmap refuses an empty mapping: a file of no tensors
        return {}
    return _tensors(header, np.memmap(path, np.uint8, mode="r", offset=start), path)


def _header(handle, size: int, path: Path) -> tuple[dict, int]:
    """The JSON header and where the data starts."""
    if size < 8:
        raise ParamFileError(f"{path.name} is truncated ({size} bytes)")
    (header_size,) = struct.unpack("<Q", handle.read(8))
    if header_size > size - 8:
        raise ParamFileError(f"{path.name} is truncated (header of {header_size} bytes in a file of {size})")
    try:
        header = json.loads(handle.read(header_size))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ParamFileError(f"{path.name} has a garbled header") from None
    if not isinstance(header, dict):
        raise ParamFileError(f"{path.name} has a garbled header")
    return header, 8 + header_size


def _aligned_buffer(size: int, header: dict) -> np.ndarray:
    """An empty buffer of ``size`` bytes placed so that most of the tensors' bytes start on a
    ``ALIGN``-byte boundary: JAX on CPU then uses those arrays' memory in place (``device_put``
    copies a NumPy array that is not 64-byte aligned). Tensors follow each other without gaps,
    so one small odd-sized tensor (a 33-letter bias) shifts every one after it: the offset
    chosen is the one most bytes share (the stacked layers'). Before, the engine's state was a
    second copy of every weight: a 650M model's whole process peaked at 5.4 GiB against HF's 3.1."""
    bytes_at = {}
    for name, info in header.items():
        try:
            begin, end = (int(x) for x in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            continue  # (``_tensors`` says what is wrong with it)
        bytes_at[begin % ALIGN] = bytes_at.get(begin % ALIGN, 0) + max(end - begin, 0)
    residue = max(bytes_at, key=bytes_at.get, default=0)
    raw = np.empty(size + ALIGN, np.uint8)
    skip = (-(raw.ctypes.data + residue)) % ALIGN
    return raw[skip:skip + size]


def _tensors(header: dict, data: np.ndarray, path: Path) -> dict[str, np.ndarray]:
    flat = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape = _DTYPES[info["dtype"]], tuple(int(d) for d in info["shape"])
            begin, end = (int(x) for x in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise ParamFileError(f"{path.name} has a garbled header entry for {name!r}") from None
        count = int(np.prod(shape, dtype=np.int64))
        if not 0 <= begin <= end <= data.size or end - begin != count * dtype.itemsize:
            raise ParamFileError(f"{path.name}: tensor {name!r} lies outside the file (truncated?)")
        flat[name] = data[begin:end].view(dtype).reshape(shape)
    return flat
