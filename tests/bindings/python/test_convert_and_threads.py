"""Checkpoint conversion through the bindings (a GPTQ layer built the way GPTQ packs it), and
the GIL being released around long C calls."""
import json
import struct
import threading
import time

import numpy as np
import pytest

import humming

RNG = np.random.default_rng(99)


def gptq_layer(n=64, k=256, group=128):
    """Random 4-bit GPTQ tensors (v1 zeros) and the weight they stand for."""
    groups = k // group
    q = RNG.integers(0, 16, (n, k), dtype=np.uint32)
    z = RNG.integers(1, 16, (groups, n), dtype=np.uint32)
    s = (2.0 ** RNG.integers(-6, -2, (groups, n))).astype(np.float16)
    shifts = (4 * np.arange(8, dtype=np.uint32))
    # qweight [K/8, N]: column n is a little-endian stream of its K codes, 8 per word.
    qweight = (q.T.reshape(k // 8, 8, n) << shifts[None, :, None]).sum(axis=1, dtype=np.uint32)
    # qzeros [G, N/8]: row g is a stream of N zero points, stored minus one (GPTQ v1).
    qzeros = ((z - 1).reshape(groups, n // 8, 8) << shifts[None, None, :]).sum(axis=2, dtype=np.uint32)
    gi = np.arange(k) // group
    w = (q.astype(np.float32) - z[gi, :].T) * s[gi, :].T.astype(np.float32)
    tensors = {"qweight": np.ascontiguousarray(qweight).view(np.int32),
               "qzeros": np.ascontiguousarray(qzeros).view(np.int32), "scales": s}
    return tensors, w


def test_scheme_names():
    assert humming.scheme_parse("gptq") == humming.SCHEME_GPTQ
    assert humming.scheme_parse("awq") == humming.SCHEME_AWQ
    with pytest.raises(humming.InvalidArgumentError) as info:
        humming.scheme_parse("not-a-scheme")
    assert info.value.status == humming.ERROR_PARSE and "not-a-scheme" in info.value.message


def test_gptq_layer_converts_exactly():
    tensors, w = gptq_layer()
    with humming.convert_layer("gptq", tensors) as layer:
        assert layer.format.shape == (64, 256, 1)
        assert layer.bias is None and layer.k_permutation is None and layer.note is None
        np.testing.assert_array_equal(layer.format.dequantize(layer.canonical), w)
        packed = layer.pack()
        np.testing.assert_array_equal(layer.format.dequantize(layer.format.unpack(packed)), w)


def test_experts_stack_into_one_moe_layer_and_gate_up_rows():
    """Experts converted one by one (each with its own weights) join into one layer of E
    experts in order, and gate / up layers of those experts into one gate_up layer, expert by
    expert (humming.torch.MoE's gate rows first); both dequantize to their parts exactly."""
    parts = [gptq_layer() for _ in range(3)]
    experts = [humming.convert_layer("gptq", t) for t, _ in parts]
    moe = humming.stack_layers(experts)
    assert moe.format.shape == (64, 256, 3)
    deq = moe.format.dequantize(moe.canonical).reshape(3, 64, 256)
    for e, (_, w) in enumerate(parts):
        np.testing.assert_array_equal(deq[e], w)
    up = humming.stack_layers(experts[::-1], "experts")
    gate_up = humming.stack_layers([moe, up], axis=humming.STACK_ROWS)
    assert gate_up.format.shape == (128, 256, 3)
    joined = gate_up.format.dequantize(gate_up.canonical).reshape(3, 128, 256)
    for e in range(3):
        np.testing.assert_array_equal(joined[e, :64], parts[e][1])
        np.testing.assert_array_equal(joined[e, 64:], parts[2 - e][1])
    with pytest.raises(humming.InvalidArgumentError, match="at least two"):
        humming.stack_layers(experts[:1])
    with pytest.raises(humming.InvalidArgumentError, match="in more than n"):
        humming.stack_layers([moe, experts[0]], "rows")
    with pytest.raises(humming.InvalidArgumentError, match="'experts' or 'rows'"):
        humming.stack_layers(experts, "columns")
    with pytest.raises(humming.InvalidArgumentError, match="not a ConvertedLayer"):
        humming.stack_layers([experts[0], "x"])
    for layer in experts + [moe, up, gate_up]:
        layer.close()


def test_conversion_errors_name_the_tensor():
    tensors, _ = gptq_layer()
    del tensors["scales"]
    with pytest.raises(humming.Error) as info:
        humming.convert_layer(humming.SCHEME_GPTQ, tensors)
    assert "scales" in info.value.message
    with pytest.raises(humming.InvalidArgumentError, match="no safetensors name"):
        humming.convert_layer("gptq", {"qweight": np.zeros(4, np.complex64)})


def write_safetensors(path, tensors):
    """A safetensors file: an 8-byte little-endian header length, the JSON header, the data."""
    names = {"int32": "I32", "float16": "F16"}
    header, blobs, offset = {}, [], 0
    for name, arr in tensors.items():
        blob = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": names[arr.dtype.name], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors_header(path):
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + length])


def test_convert_file_with_progress(tmp_path):
    tensors, _ = gptq_layer()
    prefix = "model.layers.0.mlp.down_proj"
    src, dst = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    write_safetensors(src, {f"{prefix}.{k}": v for k, v in tensors.items()}
                      | {"model.norm.weight": np.ones(8, np.float16)})
    calls = []
    humming.convert_file("gptq", src, dst, progress=lambda *args: calls.append(args))
    names = [name for name, _, _ in calls]
    assert prefix in names and "model.norm.weight" in names
    assert calls[-1][1] == calls[-1][2] > 0  # done reaches total
    header = read_safetensors_header(dst)
    fmt = humming.Format(header["__metadata__"]["humming.format." + prefix])
    assert fmt.shape == (64, 256, 1)
    assert header[prefix + ".weight"]["shape"] == [fmt.packed_sizes().weight]
    # An exception in the callback stops the conversion (nothing written) and comes back to the
    # caller; the callback is not called again.
    seen = []
    def fail(name, *_):
        seen.append(name)
        raise KeyError("stop")
    with pytest.raises(KeyError):
        humming.convert_file("gptq", src, tmp_path / "again.safetensors", progress=fail)
    assert len(seen) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.safetensors", "out.safetensors"]


def test_convert_file_reports_a_missing_input(tmp_path):
    with pytest.raises(humming.Error) as info:
        humming.convert_file("gptq", tmp_path / "missing.safetensors", tmp_path / "out.safetensors",
                             progress=lambda *a: None)
    assert "missing.safetensors" in info.value.message


def test_gil_is_released_during_long_calls():
    a = np.ones((1024, 512), np.float32)
    w = np.ones((512, 512), np.float32)
    started = threading.Event()

    def work():
        started.set()
        humming.reference_gemm(a, w)  # ~0.1 s of C code
    worker = threading.Thread(target=work)
    begin = time.perf_counter()
    worker.start()
    started.wait()
    ticks = 0
    while worker.is_alive():
        time.sleep(0.001)
        ticks += 1
    elapsed = time.perf_counter() - begin
    # Holding the GIL for the whole call would leave this thread ~0 wake-ups.
    assert ticks >= 5, f"{ticks} wake-ups in {elapsed:.3f} s: is the GIL held during C calls?"


def test_convert_model_folder(tmp_path):
    tensors, _ = gptq_layer()
    prefix = "model.layers.0.mlp.down_proj"
    src, dst = tmp_path / "model", tmp_path / "converted"
    src.mkdir()
    write_safetensors(src / "model.safetensors", {f"{prefix}.{k}": v for k, v in tensors.items()}
                      | {"model.norm.weight": np.ones(8, np.float16)})
    (src / "config.json").write_text(
        '{"model_type": "llama", "quantization_config": {"quant_method": "gptq", "bits": 4, '
        '"sym": true, "checkpoint_format": "gptq"}}')
    (src / "tokenizer.json").write_text("{}")
    planned = []
    summary = humming.convert_model(src, dst, dry_run=True,
                                    progress=lambda *args: planned.append(args))
    assert summary["layers"] == 1 and not dst.exists()
    assert ("layer", prefix) == planned[0][:2] or ("layer", prefix) in [p[:2] for p in planned]
    events = []
    summary = humming.convert_model(src, dst, threads=2, progress=lambda *a: events.append(a))
    assert (summary["layers"], summary["tensors"], summary["files"]) == (1, 1, 1)
    assert events[-1][3] == events[-1][4] > 0  # done reaches total
    assert (dst / "tokenizer.json").read_text() == "{}"
    config = json.loads((dst / "config.json").read_text())
    fmt = humming.Format(config["quantization_config"]["layers"][prefix])
    assert fmt.shape == (64, 256, 1)
    # An existing output needs force; a callback returning True cancels and writes nothing.
    with pytest.raises(humming.Error):
        humming.convert_model(src, dst)
    with pytest.raises(humming.Error):
        humming.convert_model(src, tmp_path / "cancelled", progress=lambda *a: True)
    assert not (tmp_path / "cancelled").exists()
    humming.convert_model(src, dst, force=True, gptq_writer="autogptq")


def test_convert_model_stacks_moe_experts(tmp_path):
    """Experts stored one layer each come out as one layer of E experts, gate and up joined,
    byte for byte what convert_layer + stack_layers + pack make of them, and read back with
    read_converted."""
    base = "model.layers.0.mlp.experts"
    shapes = {"gate_proj": (64, 256, 128), "up_proj": (64, 256, 128), "down_proj": (256, 64, 64)}
    tensors, layers = {}, {}
    for e in range(2):
        for proj, (n, k, group) in shapes.items():
            layer, _ = gptq_layer(n, k, group)
            tensors |= {f"{base}.{e}.{proj}.{name}": v for name, v in layer.items()}
            layers[(e, proj)] = layer
    src, dst = tmp_path / "model", tmp_path / "converted"
    src.mkdir()
    write_safetensors(src / "model.safetensors", tensors)
    (src / "config.json").write_text(
        '{"quantization_config": {"quant_method": "gptq", "bits": 4, "checkpoint_format": "gptq"}}')
    with pytest.raises(humming.InvalidArgumentError):  # joining needs stacking
        humming.convert_model(src, dst, join_gate_up=True)
    summary = humming.convert_model(src, dst, stack_experts=True, join_gate_up=True)
    assert summary["layers"] == 2
    names = [f"{base}.down_proj", f"{base}.gate_up_proj"]
    assert humming.converted_layers(dst) == names
    stored = humming.read_converted(dst)
    assert sorted(stored) == names
    with humming.StoredModel(dst) as model:
        assert str(model.format(names[1])) == str(stored[names[1]].format)
    assert stored[names[1]].format.shape == (128, 256, 2)
    assert stored[names[0]].format.shape == (256, 64, 2)

    def stacked(projs):
        per_expert = []
        for e in range(2):
            parts = [humming.convert_layer("gptq", layers[(e, p)]) for p in projs]
            per_expert.append(parts[0] if len(parts) == 1 else humming.stack_layers(parts, "rows"))
        return humming.stack_layers(per_expert, "experts")
    for name, projs in ((names[0], ["down_proj"]), (names[1], ["gate_proj", "up_proj"])):
        want = stacked(projs)
        got = stored[name]
        assert str(got.format) == str(want.format)
        packed = want.pack()
        for field in ("weight", "scales", "zero_points", "global_scale"):
            a, b = getattr(got.packed, field), getattr(packed, field)
            assert (a is None) == (b is None), field
            if a is not None:
                assert np.array_equal(a, b), f"{name} {field}"
        assert got.bias is None and got.k_permutation is None
    # One layer alone; a layer the folder lacks is named.
    assert list(humming.read_converted(dst, [names[0]])) == [names[0]]
    with pytest.raises(humming.InvalidArgumentError, match="up_proj"):
        humming.read_converted(dst, [f"{base}.up_proj"])
