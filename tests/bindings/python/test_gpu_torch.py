"""humming.torch.Linear against torch (GPU only: skipped without torch or a CUDA device)."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)

import humming  # noqa: E402
import humming.torch as hmt  # noqa: E402


def reference(layer, linear, x):
    """x @ dequant(W)^T + b in f32 (what the quantized layer should compute)."""
    w = layer.format.dequantize(layer.format.quantize(linear.weight.detach().float().cpu().numpy()))
    y = x.float() @ torch.from_numpy(w).to(x.device).T
    return y + linear.bias.float() if linear.bias is not None else y


@pytest.mark.parametrize("dtype,fmt", [(torch.float16, "w=uint4b8 a=f16 c=f16 s=f16:g128"),
                                       (torch.bfloat16, "w=uint4b8 a=bf16 c=bf16 s=bf16:g128")])
def test_linear_matches_matmul(dtype, fmt):
    torch.manual_seed(0)
    linear = torch.nn.Linear(512, 256, bias=True).to("cuda", dtype)
    layer = hmt.Linear.from_linear(linear, fmt, max_m=64)
    x = torch.randn(2, 7, 512, device="cuda", dtype=dtype)
    y = layer(x)
    assert y.shape == (2, 7, 256) and y.dtype == dtype
    expected = reference(layer, linear, x)
    error = (y.float() - expected).norm() / expected.norm()
    assert error < 1e-2
    # Close to the unquantized layer too (4-bit weights: a loose bound).
    assert ((y.float() - linear(x).float()).norm() / linear(x).float().norm()) < 0.2


@pytest.mark.parametrize("act,weight", [("e4m3", "e2m1"), ("e5m2", "e2m1"), ("int8", "uint4b8")])
def test_linear_with_8_bit_activations(act, weight):
    """a=e4m3/e5m2/int8: forward() quantizes its bf16 input per token (quantize_activation,
    group_k=0) and runs the 8-bit GEMM with those scales, i.e. computes
    dequant(codes, scales) @ dequant(W)^T (int8 activations take integer weights)."""
    torch.manual_seed(2)
    k = 512
    linear = torch.nn.Linear(k, 256, bias=True).to("cuda", torch.bfloat16)
    layer = hmt.Linear.from_linear(linear, f"w={weight} a={act} c=bf16 s=bf16:channel", max_m=64)
    assert layer.input_dtype == torch.bfloat16
    x = torch.randn(2, 7, k, device="cuda", dtype=torch.bfloat16)
    y = layer(x)
    assert y.shape == (2, 7, 256) and y.dtype == torch.bfloat16
    codes, scales = hmt.quantize_activation(x, act)
    a = humming.dequantize_activation(act, codes.reshape(-1, k).view(torch.uint8).cpu().numpy(),
                                      scales.reshape(-1, 1).cpu().numpy(), k)
    expected = reference(layer, linear, torch.from_numpy(a).to("cuda").reshape(2, 7, k))
    error = (y.float() - expected).norm() / expected.norm()
    assert error < 1e-2
    # The quantization runs inside forward(), so it is captured with the GEMM.
    graph = torch.cuda.CUDAGraph()
    static_x = x.clone()
    with torch.cuda.graph(graph):
        static_y = layer(static_x)
    static_x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(static_y, layer(static_x), rtol=0, atol=0)
    with pytest.raises(humming.InvalidArgumentError, match="dtype"):
        layer(x.half())  # the input is quantized from the layer's output dtype only


def test_linear_with_activation_groups():
    """a=e4m3:g128 (DeepSeek's 1 x 128): forward() quantizes its bf16 input per token and group
    of 128 inputs (quantize_activation, group_k=128) and passes the [M, K / 128] scales."""
    torch.manual_seed(3)
    k = 512
    linear = torch.nn.Linear(k, 256, bias=False).to("cuda", torch.bfloat16)
    layer = hmt.Linear.from_linear(linear, "w=e4m3 a=e4m3:g128 c=bf16 s=f32:b128x128", max_m=64)
    assert layer.activation_group_k == 128 and layer.format.activation_groups == 128
    x = torch.randn(2, 7, k, device="cuda", dtype=torch.bfloat16)
    y = layer(x)
    assert y.shape == (2, 7, 256) and y.dtype == torch.bfloat16
    codes, scales = hmt.quantize_activation(x, "e4m3", group_k=128)
    assert scales.shape == (2, 7, k // 128)
    a = humming.dequantize_activation("e4m3", codes.reshape(-1, k).view(torch.uint8).cpu().numpy(),
                                      scales.reshape(-1, k // 128).cpu().numpy(), k, 128)
    expected = reference(layer, linear, torch.from_numpy(a).to("cuda").reshape(2, 7, k))
    error = (y.float() - expected).norm() / expected.norm()
    assert error < 1e-2


def test_linear_on_a_side_stream_and_under_graph_capture():
    torch.manual_seed(1)
    linear = torch.nn.Linear(256, 128, bias=False).to("cuda", torch.float16)
    layer = hmt.Linear.from_linear(linear, "w=uint4b8 a=f16 c=f16 s=f16:g128", max_m=16)
    x = torch.randn(16, 256, device="cuda", dtype=torch.float16)
    eager = layer(x)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        side = layer(x)
    torch.cuda.current_stream().wait_stream(stream)
    torch.testing.assert_close(side, eager, rtol=0, atol=0)
    graph = torch.cuda.CUDAGraph()
    static_x = x.clone()
    with torch.cuda.graph(graph):
        static_y = layer(static_x)
    static_x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(static_y, layer(static_x), rtol=0, atol=0)


def test_bad_inputs_raise_clear_errors():
    linear = torch.nn.Linear(256, 128).to("cuda", torch.float16)
    layer = hmt.Linear.from_linear(linear, "w=uint4b8 a=f16 c=f16 s=f16:g128", max_m=16)
    with pytest.raises(humming.InvalidArgumentError, match="features"):
        layer(torch.randn(4, 255, device="cuda", dtype=torch.float16))
    with pytest.raises(humming.InvalidArgumentError, match="dtype"):
        layer(torch.randn(4, 256, device="cuda", dtype=torch.float32))


def test_replace_linears_serves_a_converted_model(tmp_path):
    """A model built from its config gets its nn.Linear layers swapped for the converted ones
    (humming.torch.replace_linears); the output matches the checkpoint's own dequantization in
    float64, and a converted layer whose shape disagrees with the module is refused untouched."""
    from test_convert_and_threads import gptq_layer, write_safetensors
    n, k = 64, 256
    tensors, w = gptq_layer(n, k, 128)
    src, dst = tmp_path / "model", tmp_path / "converted"
    src.mkdir()
    name = "model.layers.0.mlp.down_proj"
    write_safetensors(src / "model.safetensors", {f"{name}.{t}": v for t, v in tensors.items()})
    (src / "config.json").write_text(
        '{"quantization_config": {"quant_method": "gptq", "bits": 4, "checkpoint_format": "gptq"}}')
    humming.convert_model(src, dst)

    def skeleton(out_features):
        root = torch.nn.Module()
        root.model = torch.nn.Module()
        root.model.layers = torch.nn.ModuleList([torch.nn.Module()])
        root.model.layers[0].mlp = torch.nn.Module()
        root.model.layers[0].mlp.down_proj = torch.nn.Linear(k, out_features, bias=False)
        root.model.layers[0].mlp.up_proj = torch.nn.Linear(k, out_features, bias=False)
        return root

    wrong = skeleton(n + 8)
    with pytest.raises(humming.InvalidArgumentError, match=name):
        hmt.replace_linears(wrong, dst)
    assert isinstance(wrong.model.layers[0].mlp.down_proj, torch.nn.Linear)
    model = skeleton(n)
    assert hmt.replace_linears(model, dst) == [name]
    layer = model.model.layers[0].mlp.down_proj
    assert isinstance(layer, hmt.Linear)
    assert isinstance(model.model.layers[0].mlp.up_proj, torch.nn.Linear)  # not converted
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(5, k, generator=g) * 0.1).half()
    got = layer(x.cuda()).double().cpu()
    want = x.double() @ torch.from_numpy(w).double().T
    err = float((got - want).norm() / want.norm())
    assert err < 2e-3, err
