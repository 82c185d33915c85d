"""Reading converted checkpoints back: the standard layout that convert_file / convert_model
(`humming convert`) write (docs/convert.md "Reading it back"), through the library's reader
(hm_stored_model_*), as a Format and a PackedWeight per layer, ready for Plan.gemm,
humming.torch.Linear or humming.torch.MoE. Only the layers asked for are read."""
import ctypes
import os
from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import raw
from ._convert import _copy
from ._errors import check
from ._format import Format, PackedWeight
from ._handle import Handle


@dataclass
class StoredLayer:
    """A converted layer as stored: `format`, `packed` (standard-layout bytes, host copies),
    `bias` (float32 [E * N] or None), `k_permutation` (int32 [K] or None: gather the activations
    with it, A'[:, k] = A[:, k_permutation[k]]) and `note` (what the conversion lost, or None)."""
    format: Format
    packed: PackedWeight
    bias: Optional[np.ndarray] = None
    k_permutation: Optional[np.ndarray] = None
    note: Optional[str] = None


class StoredModel(Handle):
    """A converted folder (convert_model's output) or file (convert_file's), opened:
    `layers` lists the converted layers' names; format(name) gives one's Format from the
    header; read(name) reads one."""

    _destroy = staticmethod(raw.hm_stored_model_destroy)

    def __init__(self, path):
        status, handle = raw.hm_stored_model_open(os.fspath(path))
        check(status)
        super().__init__(handle)
        status, count = raw.hm_stored_model_layer_count(self.handle)
        check(status)
        self.layers = []
        for i in range(count):
            status, name = raw.hm_stored_model_layer_name(self.handle, i)
            check(status)
            self.layers.append(name)

    def format(self, name):
        """The layer's Format, from the header alone (no tensor is read)."""
        status, fmt = raw.hm_stored_model_layer_format(self.handle, str(name))
        check(status)
        return Format._adopt(fmt)

    def read(self, name):
        status, layer = raw.hm_stored_model_read(self.handle, str(name))
        check(status)
        try:
            status, fmt = raw.hm_stored_layer_format(layer)
            check(status)
            fmt = Format._adopt(fmt)
            info = raw.hm_stored_layer_info_t()
            raw.hm_stored_layer_info_init(info)
            check(raw.hm_stored_layer_info(layer, info))
            sizes = fmt.packed_sizes()
            n, k, e = fmt.shape
            p = info.packed
            packed = PackedWeight(
                weight=_copy(p.weight, ctypes.c_uint8, sizes.weight, np.uint8),
                scales=_copy(p.scales, ctypes.c_uint8, sizes.scales, np.uint8),
                zero_points=_copy(p.zero_points, ctypes.c_uint8, sizes.zero_points, np.uint8),
                global_scale=_copy(p.global_scale, ctypes.c_float, sizes.global_scale // 4,
                                   np.float32))
            return StoredLayer(fmt, packed, _copy(info.bias, ctypes.c_float, e * n, np.float32),
                               _copy(info.k_permutation, ctypes.c_int32, k, np.int32),
                               info.note or None)
        finally:
            raw.hm_stored_layer_destroy(layer)


def converted_layers(path):
    """The names (prefixes) of the converted layers of a folder or file, sorted; only the
    shards' headers are read."""
    with StoredModel(path) as model:
        return list(model.layers)


def read_converted(path, prefixes=None):
    """{prefix: StoredLayer} for the converted layers of a folder or file: all of them, or the
    names in `prefixes` (a missing one raises InvalidArgumentError naming it). Each layer's
    tensors are checked against its format's packed sizes."""
    with StoredModel(path) as model:
        names = model.layers if prefixes is None else list(prefixes)
        return {name: model.read(name) for name in names}
