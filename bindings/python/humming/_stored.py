"""Reading converted checkpoints back: the standard layout that convert_file / convert_model
(`humming convert`) write (docs/convert.md "Output"), as a Format and a PackedWeight per layer,
ready for Plan.gemm, humming.torch.Linear or humming.torch.MoE. Only the tensors of the layers
asked for are read (each with one positioned read), so a layer of a large model loads alone."""
import json
import os
import struct
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ._errors import argument_error
from ._format import Format, PackedWeight

# Where write_packed (src/schema/file.cpp) puts a layer's format string and note.
_FORMAT_KEY = "humming.format."
_NOTE_KEY = "humming.note."
_INDEX = "model.safetensors.index.json"
_HEADER_LIMIT = 100 << 20  # as the library's reader: a larger header is no checkpoint


@dataclass
class StoredLayer:
    """A converted layer as stored: `format`, `packed` (standard-layout bytes), `bias` (float32
    [E * N] or None), `k_permutation` (int32 [K] or None: gather the activations with it,
    A'[:, k] = A[:, k_permutation[k]]) and `note` (what the conversion lost, or None)."""
    format: Format
    packed: PackedWeight
    bias: Optional[np.ndarray] = None
    k_permutation: Optional[np.ndarray] = None
    note: Optional[str] = None


def _shards(path):
    """The safetensors files of a converted folder (the index's, else every *.safetensors), or
    the one file given."""
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        raise argument_error(f"{path!r} is neither a converted .safetensors file nor a folder")
    index = os.path.join(path, _INDEX)
    if os.path.exists(index):
        with open(index, encoding="utf-8") as f:
            names = sorted(set(json.load(f).get("weight_map", {}).values()))
    else:
        names = sorted(n for n in os.listdir(path) if n.endswith(".safetensors"))
    if not names:
        raise argument_error(f"{path!r} holds no .safetensors file")
    return [os.path.join(path, n) for n in names]


def _header(path):
    with open(path, "rb") as f:
        size_bytes = f.read(8)
        if len(size_bytes) != 8:
            raise argument_error(f"{path!r} is not a safetensors file (shorter than 8 bytes)")
        (size,) = struct.unpack("<Q", size_bytes)
        if size > _HEADER_LIMIT:
            raise argument_error(f"{path!r}: a header of {size} bytes is not a safetensors one")
        header = json.loads(f.read(size))
    return header, 8 + size


class _File:
    def __init__(self, path):
        self.path = path
        self.header, self.base = _header(path)
        self.metadata = self.header.get("__metadata__") or {}
        self.size = os.path.getsize(path)

    def bytes(self, name):
        """The tensor's bytes as uint8 (a copy), or None when the file has no such tensor."""
        entry = self.header.get(name)
        if entry is None:
            return None
        begin, end = entry["data_offsets"]
        if not 0 <= begin <= end or self.base + end > self.size:
            raise argument_error(f"{self.path!r}: tensor {name!r} lies outside the file")
        return np.fromfile(self.path, dtype=np.uint8, count=end - begin, offset=self.base + begin)

    def dtype(self, name):
        return self.header[name]["dtype"]


def _floats(data, dtype):
    """F32 / F16 / BF16 bytes as float32 values."""
    if dtype == "F32":
        return data.view(np.float32).copy()
    if dtype == "F16":
        return data.view(np.float16).astype(np.float32)
    return (data.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def _layer(file, prefix):
    fmt = Format(file.metadata[_FORMAT_KEY + prefix])
    sizes = fmt.packed_sizes()

    def buffer(suffix, want):
        name = prefix + suffix
        data = file.bytes(name)
        if want == 0:
            if data is not None:
                raise argument_error(f"{file.path!r} has {name!r}, which {fmt} does not have")
            return None
        if data is None or data.size != want:
            got = "no such tensor" if data is None else f"{data.size} bytes"
            raise argument_error(f"{file.path!r}: {name!r} must hold {want} bytes for {fmt}; "
                                 f"found {got}")
        return data

    global_scale = buffer(".global_scale", sizes.global_scale)
    packed = PackedWeight(
        weight=buffer(".weight", sizes.weight),
        scales=buffer(".weight_scale", sizes.scales),
        zero_points=buffer(".weight_zero_point", sizes.zero_points),
        global_scale=None if global_scale is None else global_scale.view(np.float32))
    n, k, e = fmt.shape
    bias = None
    if fmt.bias:
        name = prefix + ".bias"
        dtype = file.dtype(name) if name in file.header else None
        width = {"F32": 4, "F16": 2, "BF16": 2}.get(dtype)
        if width is None:
            raise argument_error(f"{file.path!r}: {name!r} must be an F32, F16 or BF16 tensor "
                                 f"for {fmt}; found " + (dtype or "no such tensor"))
        bias = _floats(buffer(".bias", e * n * width), dtype)
    else:
        buffer(".bias", 0)
    perm = file.bytes(prefix + ".k_permutation")
    if perm is not None:
        if perm.size != 4 * k:
            raise argument_error(f"{file.path!r}: {prefix + '.k_permutation'!r} must hold {k} "
                                 f"int32 values")
        perm = perm.view(np.int32)
    return StoredLayer(fmt, packed, bias, perm, file.metadata.get(_NOTE_KEY + prefix))


def converted_layers(path):
    """The names (prefixes) of the converted layers of a folder or file, from the shards'
    headers alone (no tensor is read), sorted."""
    names = set()
    for shard in _shards(os.fspath(path)):
        names.update(key[len(_FORMAT_KEY):] for key in _File(shard).metadata
                     if key.startswith(_FORMAT_KEY))
    return sorted(names)


def read_converted(path, prefixes=None):
    """The converted layers of a folder written by convert_model (or a file written by
    convert_file), as {prefix: StoredLayer}; prefixes (an iterable of layer names) reads only
    those and raises for a missing one. A layer's tensors are checked against its format's
    packed sizes."""
    wanted = None if prefixes is None else set(prefixes)
    layers = {}
    for shard in _shards(os.fspath(path)):
        file = _File(shard)
        for key in sorted(file.metadata):
            if not key.startswith(_FORMAT_KEY):
                continue
            prefix = key[len(_FORMAT_KEY):]
            if wanted is None or prefix in wanted:
                layers[prefix] = _layer(file, prefix)
    if wanted is not None and wanted - layers.keys():
        missing = sorted(wanted - layers.keys())
        raise argument_error(f"{os.fspath(path)!r} has no converted layer {missing[0]!r}"
                             + (f" (nor {len(missing) - 1} more)" if len(missing) > 1 else ""))
    return layers
