"""humming.torch.moe_align / moe_reduce against plain torch (GPU only: skipped without torch or a
CUDA device): the alignment element for element, the reduction bit for bit (small-integer values
and power-of-two weights keep every f32 sum exact), and both under CUDA graph capture."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)

import humming.torch as hmt  # noqa: E402


def torch_alignment(ids, num_experts, block, expert_map=None, local=0):
    flat = ids.reshape(-1).long().cpu()
    local = local or num_experts
    keep = (flat >= 0) & (flat < num_experts)
    experts = torch.where(keep, flat, torch.zeros_like(flat))
    if expert_map is not None:
        experts = expert_map.long().cpu()[experts]
    experts = torch.where(keep & (experts >= 0) & (experts < local), experts, -1)
    sorted_ids, expert_ids, offsets = [], [], [0]
    for e in range(local):
        mine = torch.nonzero(experts == e).flatten().tolist()
        padded = -(-len(mine) // block) * block
        sorted_ids += mine + [flat.numel()] * (padded - len(mine))
        expert_ids += [e] * (padded // block)
        offsets.append(offsets[-1] + padded)
    return sorted_ids, expert_ids, offsets


@pytest.mark.parametrize("tokens,experts,block,use_map", [(1, 128, 64, False), (333, 256, 16, False),
                                                          (4096, 256, 64, True)])
def test_moe_align_matches_torch(tokens, experts, block, use_map):
    g = torch.Generator().manual_seed(tokens)
    ids = torch.randint(-1, experts + 1, (tokens, 8), generator=g, dtype=torch.int32).cuda()
    expert_map, local = None, 0
    if use_map:
        expert_map = torch.full((experts,), -1, dtype=torch.int32)
        expert_map[::4] = torch.arange(experts // 4, dtype=torch.int32)
        expert_map, local = expert_map.cuda(), experts // 4
    sorted_ids, expert_ids, padded, offsets, counts = hmt.moe_align(
        ids, experts, block, expert_map, num_local_experts=local, with_counts=True)
    want_sorted, want_experts, want_offsets = torch_alignment(ids, experts, block, expert_map, local)
    used = int(padded.item())
    assert used == len(want_sorted)
    assert sorted_ids[:used].tolist() == want_sorted
    assert (sorted_ids[used:] == ids.numel()).all()
    assert expert_ids[:used // block].tolist() == want_experts
    assert (expert_ids[used // block:] == -1).all()
    assert offsets.tolist() == want_offsets
    assert int(counts.sum()) == sum(1 for x in want_sorted if x != ids.numel())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_moe_reduce_matches_torch_and_captures(dtype):
    g = torch.Generator().manual_seed(7)
    tokens, top_k, n, experts = 100, 8, 2048, 64
    ids = torch.randint(-1, experts, (tokens, top_k), generator=g, dtype=torch.int32).cuda()
    weights = (torch.randint(0, 8, (tokens, top_k), generator=g) / 8).float().cuda()
    values = torch.randint(-16, 16, (tokens * top_k, n), generator=g).to(dtype).cuda()
    kept = (ids >= 0).reshape(-1, 1)
    want = (values.float() * weights.reshape(-1, 1) * kept).reshape(tokens, top_k, n).sum(1)
    assert torch.equal(hmt.moe_reduce(values, weights, ids, experts), want.to(dtype))

    out = torch.empty((tokens, n), dtype=dtype, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        hmt.moe_reduce(values, weights, ids, experts, out=out)
    ids.copy_(torch.randint(-1, experts, (tokens, top_k), generator=g, dtype=torch.int32))
    graph.replay()
    torch.cuda.synchronize()
    kept = (ids >= 0).reshape(-1, 1)
    want = (values.float() * weights.reshape(-1, 1) * kept).reshape(tokens, top_k, n).sum(1)
    assert torch.equal(out, want.to(dtype))


def quantized_moe(text, experts, hidden, inter, g):
    """humming.torch.MoE of random experts in the format `text` (gate_up [E, 2I, H], down
    [E, H, I]), with the host-dequantized experts (float64) the reference multiplies."""
    from humming import Format
    w13 = torch.randn(experts, 2 * inter, hidden, generator=g) * 0.05
    w2 = torch.randn(experts, hidden, inter, generator=g) * 0.05
    gu, dn = Format(text), Format(text)
    gu.set_shape(2 * inter, hidden, experts)
    dn.set_shape(hidden, inter, experts)
    gu_q, dn_q = gu.quantize(w13.numpy()), dn.quantize(w2.numpy())
    layer = hmt.MoE(gu, gu.pack(gu_q), dn, dn.pack(dn_q))
    return (layer, torch.from_numpy(gu.dequantize(gu_q)).double(),
            torch.from_numpy(dn.dequantize(dn_q)).double())


def moe_reference(x, ids, weights, deq13, deq2, inter, down_input=lambda a: a):
    """sum_j weights[t, j] * down_e(down_input(silu(gate_e(x[t])) * up_e(x[t]))) in float64,
    e = ids[t, j], dropped assignments (e < 0) adding nothing."""
    want = torch.zeros(x.shape[0], deq2.shape[1], dtype=torch.float64)
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            if e < 0:
                continue
            h = deq13[e] @ x[t]
            want[t] += float(weights[t, j]) * (deq2[e] @ down_input(
                torch.nn.functional.silu(h[:inter]) * h[inter:]))
    return want


@pytest.mark.parametrize("tokens,top_k,dtype", [(1, 2, torch.float16), (37, 2, torch.float16),
                                                 (300, 3, torch.bfloat16)])
def test_moe_layer_matches_torch(tokens, top_k, dtype):
    """humming.torch.MoE (align -> gate_up GEMM -> SiLU * up -> down GEMM -> reduce) against the
    same computation in float64 on the host-dequantized experts, with some assignments dropped."""
    import numpy as np
    experts, hidden, inter = 8, 256, 128
    g = torch.Generator().manual_seed(tokens)
    name = "f16" if dtype == torch.float16 else "bf16"
    layer, deq13, deq2 = quantized_moe(f"w=uint4b8 a={name} c={name} s={name}:g64", experts,
                                       hidden, inter, g)
    x = torch.randn(tokens, hidden, generator=g).to(dtype)
    ids = torch.stack([torch.randperm(experts, generator=g)[:top_k] for _ in range(tokens)])
    ids = ids.to(torch.int32)
    ids[::5, 0] = -1  # dropped assignments (an expert on another rank, or router padding)
    weights = torch.rand(tokens, top_k, generator=g)
    y = layer(x.cuda(), ids.cuda(), weights.cuda())
    torch.cuda.synchronize()
    want = moe_reference(x.double(), ids, weights, deq13, deq2, inter)
    got = y.double().cpu()
    assert torch.isfinite(got).all()
    err = float((got - want).norm() / want.norm())
    assert err < (2e-2 if dtype == torch.float16 else 6e-2), err
    assert np.isfinite(err)


@pytest.mark.parametrize("act,weight,scales", [("e4m3", "e2m1", "ue8m0:g32+tensor"),
                                               ("int8", "uint4b8", "bf16:g128")])
def test_moe_layer_with_8_bit_activations(act, weight, scales):
    """humming.torch.MoE on 8-bit activations (gpt-oss-style MXFP4 experts with e4m3; GPTQ int4
    g128 with int8): forward() quantizes x and the SiLU * up product per token on the device
    before each GEMM. The reference takes x's codes as the kernel reads them (exact), and
    quantizes its own f64 SiLU * up with the host quantizer (the GPU's rule): the kernel's
    product went through bf16 first, so a few codes differ by one step."""
    import humming
    experts, hidden, inter, tokens, top_k = 8, 256, 128, 45, 3
    g = torch.Generator().manual_seed(5)
    layer, deq13, deq2 = quantized_moe(f"w={weight} a={act} c=bf16 s={scales}", experts, hidden,
                                       inter, g)
    x = torch.randn(tokens, hidden, generator=g).to(torch.bfloat16).cuda()
    ids = torch.stack([torch.randperm(experts, generator=g)[:top_k] for _ in range(tokens)])
    ids = ids.to(torch.int32)
    ids[::4, 1] = -1
    weights = torch.rand(tokens, top_k, generator=g)
    y = layer(x, ids.cuda(), weights.cuda())
    torch.cuda.synchronize()
    codes, x_scales = hmt.quantize_activation(x, act)
    xq = torch.from_numpy(humming.dequantize_activation(
        act, codes.view(torch.uint8).cpu().numpy(), x_scales.reshape(-1, 1).cpu().numpy(),
        hidden)).double()
    def quantized(prod):  # the host quantizer's rule, as the GPU's quantizer applies it
        c, s = humming.quantize_activation(act, prod.float().numpy()[None])
        return torch.from_numpy(humming.dequantize_activation(act, c, s, inter)).double()[0]

    want = moe_reference(xq, ids, weights, deq13, deq2, inter, quantized)
    got = y.double().cpu()
    assert torch.isfinite(got).all()
    err = float((got - want).norm() / want.norm())
    assert err < (5e-2 if act == "e4m3" else 3e-2), err


def test_moe_from_a_converted_folder(tmp_path):
    """A GPTQ MoE checkpoint with experts stored one layer each, converted with stacked experts
    and gate and up joined (humming.convert_model), loaded with MoE.from_converted and run
    against the checkpoint's own dequantization in float64."""
    import humming
    from test_convert_and_threads import gptq_layer, write_safetensors
    experts, hidden, inter, tokens, top_k = 4, 256, 128, 29, 2
    base = "model.layers.0.mlp.experts"
    tensors, deq13, deq2 = {}, [], []
    for e in range(experts):
        ws = {}
        for proj, (n, k) in {"gate_proj": (inter, hidden), "up_proj": (inter, hidden),
                             "down_proj": (hidden, inter)}.items():
            layer, ws[proj] = gptq_layer(n, k, 128)
            tensors |= {f"{base}.{e}.{proj}.{name}": v for name, v in layer.items()}
        deq13.append(torch.cat([torch.from_numpy(ws["gate_proj"]),
                                torch.from_numpy(ws["up_proj"])]).double())
        deq2.append(torch.from_numpy(ws["down_proj"]).double())
    src, dst = tmp_path / "model", tmp_path / "converted"
    src.mkdir()
    write_safetensors(src / "model.safetensors", tensors)
    (src / "config.json").write_text(
        '{"quantization_config": {"quant_method": "gptq", "bits": 4, "checkpoint_format": "gptq"}}')
    humming.convert_model(src, dst, stack_experts=True, join_gate_up=True)
    layer = hmt.MoE.from_converted(dst, base)
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(tokens, hidden, generator=g) * 0.1).half()
    ids = torch.stack([torch.randperm(experts, generator=g)[:top_k] for _ in range(tokens)])
    ids = ids.to(torch.int32)
    weights = torch.rand(tokens, top_k, generator=g)
    y = layer(x.cuda(), ids.cuda(), weights.cuda())
    torch.cuda.synchronize()
    want = moe_reference(x.double(), ids, weights, torch.stack(deq13), torch.stack(deq2), inter)
    got = y.double().cpu()
    assert torch.isfinite(got).all()
    err = float((got - want).norm() / want.norm())
    assert err < 2e-2, err
    with pytest.raises(humming.InvalidArgumentError, match="--stack-experts"):
        hmt.MoE.from_converted(dst, "model.layers.1.mlp.experts")
