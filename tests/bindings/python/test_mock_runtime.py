"""Contexts, device memory, kernels, launches and plans on the mock CUDA driver (device pointers
there are host memory, and the reference GEMM kernel runs as host code, so results are real)."""
import os
import re
import threading

import numpy as np
import pytest

import humming
from humming import Format

RNG = np.random.default_rng(7)
PLAN_FORMAT = "w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=256"


def test_runtime_info_and_device_info(mock_context):
    info = humming.runtime_info()
    assert info.device_count == 2 and "humming_mock_cuda" in info.driver_path
    d = mock_context.device_info()
    assert d.device == 0 and (d.cc_major, d.cc_minor) == (9, 0) and d.arch == "sm_90a"
    assert "Mock" in d.name and d.multiprocessors > 0


def test_device_memory_round_trip(mock_context):
    host = RNG.standard_normal((3, 5)).astype(np.float32)
    with mock_context.to_device(host) as dev:
        assert dev.__cuda_array_interface__["shape"] == (3, 5)
        np.testing.assert_array_equal(dev.numpy(), host)
    assert dev.ptr is None
    with pytest.raises(humming.InvalidArgumentError, match="closed"):
        dev.__cuda_array_interface__


def test_allocation_failure_is_out_of_memory(mock_context):
    os.environ["HM_MOCK_FAIL_ALLOC"] = "1"
    try:
        with pytest.raises(humming.OutOfMemoryError) as info:
            mock_context.alloc(1024)
    finally:
        del os.environ["HM_MOCK_FAIL_ALLOC"]
    assert info.value.status == humming.ERROR_DEVICE_OUT_OF_MEMORY
    assert info.value.message


def test_reference_kernel_gemm_matches_host(mock_context):
    kernel = mock_context.reference_gemm_kernel("f32", "f32")
    assert kernel.name == "reference_gemm_f32_f32" and len(kernel.cache_key) == 64
    a = RNG.integers(-4, 5, (6, 40)).astype(np.float32)  # small integers: exact sums
    b = RNG.integers(-4, 5, (9, 40)).astype(np.float32)
    expected = humming.reference_gemm(a, b)
    da, db = mock_context.to_device(a), mock_context.to_device(b)
    dc = mock_context.empty((6, 9), np.float32)
    kernel(da, db, dc)
    mock_context.synchronize()
    np.testing.assert_array_equal(dc.numpy(), expected)
    # The same through explicit launch parameters.
    dc2 = mock_context.empty((6, 9), np.float32)
    with humming.LaunchParams(a=da, b=db, c=dc2.ptr, m=6, n=9, k=40) as params:
        kernel.launch(params)
    mock_context.synchronize()
    np.testing.assert_array_equal(dc2.numpy(), expected)
    with pytest.raises(humming.InvalidArgumentError, match="'c' has shape"):
        kernel(da, db, mock_context.empty((9, 6), np.float32))
    with pytest.raises(humming.InvalidArgumentError, match="unknown launch slot"):
        humming.LaunchParams(alpha=1)
    kernel.close()


def test_plan_lifecycle_and_checks(mock_context):
    fmt = Format(PLAN_FORMAT)
    with mock_context.plan(fmt, max_m=64) as plan:
        plan.prepare()
        assert plan.workspace_size() >= plan.workspace_size(16) >= 0
        assert plan.describe(16)
        n, k = 256, 256
        w = RNG.standard_normal((n, k)).astype(np.float32)
        weight = humming.DevicePackedWeight.upload(mock_context, fmt.pack(fmt.quantize(w)))
        a = mock_context.empty((16, k), np.float16)
        c = mock_context.empty((16, n), np.float16)
        workspace = plan.allocate_workspace(16)
        if workspace is not None:
            assert not workspace.numpy().any()  # zeroed once, as the kernels expect
        plan.gemm(a, weight, c, workspace=workspace)  # launches (the mock does not compute it)
        mock_context.synchronize()
        with pytest.raises(humming.InvalidArgumentError, match="'a' has dtype float32"):
            plan.gemm(mock_context.empty((16, k), np.float32), weight, c, workspace=workspace)
        with pytest.raises(humming.InvalidArgumentError, match=r"'c' has shape \(16, 128\)"):
            plan.gemm(a, weight, mock_context.empty((16, 128), np.float16), workspace=workspace)
        with pytest.raises(humming.InvalidArgumentError, match="weight.scales is None"):
            plan.gemm(a, humming.DevicePackedWeight(weight.weight), c, workspace=workspace)
        with pytest.raises(humming.InvalidArgumentError, match="format has no bias"):
            plan.gemm(a, weight, c, bias=c, workspace=workspace)
        with pytest.raises(humming.InvalidArgumentError, match="exceeds the plan's max_m"):
            big = mock_context.empty((65, k), np.float16)
            plan.gemm(big, weight, mock_context.empty((65, n), np.float16), workspace=workspace)
        weight.close()


def test_act_scales_slot_is_the_headers(header_text):
    # A new pointer slot (8-bit activations' per-token scales), taken by launch params.
    assert humming.ARG_ACT_SCALES == humming.raw.HM_ARG_ACT_SCALES == 11
    assert re.search(r"^#define HM_ARG_ACT_SCALES 11\b", header_text, flags=re.M)
    humming.LaunchParams(act_scales=0x1000).close()


def test_gemm_takes_act_scales_with_8_bit_activations_only(mock_context, monkeypatch):
    m, n, k = 16, 128, 256
    w = RNG.standard_normal((n, k)).astype(np.float32)
    scales = mock_context.empty((m,), np.float32)
    c = mock_context.empty((m, n), np.float16)
    f16 = Format(f"w=uint4b8 a=f16 c=f16 s=f16:g128 n={n} k={k}")
    with mock_context.plan(f16) as plan:
        weight = humming.DevicePackedWeight.upload(mock_context, f16.pack(f16.quantize(w)))
        with pytest.raises(humming.InvalidArgumentError, match="'act_scales' was given"):
            plan.gemm(mock_context.empty((m, k), np.float16), weight, c, act_scales=scales)

    # e4m3 activations: a is [M, K] codes, one byte each, with their float32 [M] scales (c=f16:
    # numpy has no bfloat16 for the output).
    spec = f"w=e2m1 a=e4m3 c=f16 s=f16:channel n={n} k={k}"
    fmt, planned = Format(spec), True
    try:
        plan = mock_context.plan(fmt).prepare()
    except humming.UnsupportedError as e:
        # Until the library has 8-bit activation kernels: the binding's own checks, which run
        # before the C call, through a plan whose recorded activation dtype says e4m3.
        print(f"the library cannot plan {spec!r} yet ({e.message}); checking the binding only")
        plan, fmt, planned = mock_context.plan(f16), f16, False
        monkeypatch.setattr(plan, "_activation", humming.DType.E4M3)
    with plan:
        weight = humming.DevicePackedWeight.upload(mock_context, fmt.pack(fmt.quantize(w)))
        codes = mock_context.empty((m, k), np.uint8)
        with pytest.raises(humming.InvalidArgumentError, match="'act_scales' is None"):
            plan.gemm(codes, weight, c)
        with pytest.raises(humming.InvalidArgumentError, match=r"'act_scales' has shape \(15,\)"):
            plan.gemm(codes, weight, c, act_scales=mock_context.empty((m - 1,), np.float32))
        with pytest.raises(humming.InvalidArgumentError, match="'act_scales' has dtype float16"):
            plan.gemm(codes, weight, c, act_scales=mock_context.empty((m,), np.float16))
        with pytest.raises(humming.InvalidArgumentError, match="'a' has dtype float16"):
            plan.gemm(mock_context.empty((m, k), np.float16), weight, c, act_scales=scales)
        if planned:
            # A launch (the mock does not compute it); [M, 1], as quantize_activation_device
            # returns per-token scales, is the same memory.
            workspace = plan.allocate_workspace(m)
            plan.gemm(codes, weight, c, act_scales=scales, workspace=workspace)
            plan.gemm(codes, weight, c, act_scales=mock_context.empty((m, 1), np.float32),
                      workspace=workspace)
            mock_context.synchronize()

    # int8 activations carry their per-token scales too (the library requires them).
    int8 = Format(f"w=uint4b8 a=int8 c=f16 s=f16:channel n={n} k={k}")
    with mock_context.plan(int8).prepare() as plan:
        weight = humming.DevicePackedWeight.upload(mock_context, int8.pack(int8.quantize(w)))
        codes = mock_context.empty((m, k), np.int8)
        with pytest.raises(humming.InvalidArgumentError, match="'act_scales' is None"):
            plan.gemm(codes, weight, c)
        plan.gemm(codes, weight, c, act_scales=scales, workspace=plan.allocate_workspace(m))
        mock_context.synchronize()


def test_gemm_takes_grouped_act_scales(mock_context, monkeypatch):
    # Activation groups (a=e4m3:g128, DeepSeek's 1 x 128): the scales are float32 [M, G],
    # G = ceil(K / 128), one per row and K group, as quantize_activation_device with
    # group_k=128 writes them (c=f16: numpy has no bfloat16 for the output).
    m, n, k = 16, 256, 512
    g = k // 128
    spec = f"w=e4m3 a=e4m3:g128 c=f16 s=f32:b128x128 n={n} k={k}"
    fmt, planned = Format(spec), True
    assert fmt.activation_groups == 128
    w = RNG.standard_normal((n, k)).astype(np.float32)
    try:
        plan = mock_context.plan(fmt).prepare()
    except humming.UnsupportedError as e:
        # Where the library cannot plan it: the binding's own checks, which run before the C
        # call, through a plan whose recorded activation and groups say e4m3:g128.
        print(f"the library cannot plan {spec!r} ({e.message}); checking the binding only")
        fmt = Format(f"w=uint4b8 a=f16 c=f16 s=f16:g128 n={n} k={k}")
        plan, planned = mock_context.plan(fmt), False
        monkeypatch.setattr(plan, "_activation", humming.DType.E4M3)
        monkeypatch.setattr(plan, "_act_group_k", 128)
    c = mock_context.empty((m, n), np.float16)
    with plan:
        weight = humming.DevicePackedWeight.upload(mock_context, fmt.pack(fmt.quantize(w)))
        codes = mock_context.empty((m, k), np.uint8)
        with pytest.raises(humming.InvalidArgumentError, match=r"'act_scales' is None.*\(16, 4\)"):
            plan.gemm(codes, weight, c)
        # Per-token scales are not enough for a grouped format, in either form.
        for shape in ((m,), (m, 1), (m, g - 1), (m * g,)):
            with pytest.raises(humming.InvalidArgumentError,
                               match=r"'act_scales' has shape .*expected shape \(16, 4\)"):
                plan.gemm(codes, weight, c, act_scales=mock_context.empty(shape, np.float32))
        with pytest.raises(humming.InvalidArgumentError, match="'act_scales' has dtype float16"):
            plan.gemm(codes, weight, c, act_scales=mock_context.empty((m, g), np.float16))
        if planned:
            workspace = plan.allocate_workspace(m)
            plan.gemm(codes, weight, c, act_scales=mock_context.empty((m, g), np.float32),
                      workspace=workspace)
            mock_context.synchronize()


def test_plan_rejects_what_the_arch_cannot_run(cache_dir):
    if not os.environ.get("HUMMING_MOCK_DRIVER"):
        pytest.skip("HUMMING_MOCK_DRIVER is not set")
    with humming.Context(1, cache_dir=cache_dir) as sm80:  # the mock's second device is sm_80
        with pytest.raises(humming.UnsupportedError) as info:
            sm80.plan("w=e2m1 a=e2m1 c=f16 s=ue8m0:g32 n=256 k=256")
        assert info.value.message


def test_context_without_device(cache_dir):
    with humming.Context(None, target_arch="sm_90a", cache_dir=cache_dir) as ctx:
        info = ctx.device_info()
        assert info.device == humming.NO_DEVICE and info.arch == "sm_90a"
        with pytest.raises(humming.Error):
            ctx.alloc(16)  # no device memory without a device
    with pytest.raises(humming.InvalidArgumentError, match="target_arch"):
        humming.Context(None)
    with pytest.raises(humming.InvalidArgumentError, match="compiler"):
        humming.Context(None, target_arch="sm_90a", compiler="clang")


def test_pack_device_matches_host_pack(mock_context):
    # The mock runs the packer's lane function on the host: the result is the real packing.
    fmt = Format("w=uint4 a=f16 c=f16 s=f16:g64 zp=uint4 n=70 k=200 e=2")
    sizes = fmt.canonical_sizes()
    codes = RNG.integers(0, 16, sizes.codes).astype(np.uint8)
    scale_values = RNG.integers(1, 64, sizes.scales).astype(np.float16) / np.float16(32)
    zp_values = RNG.integers(0, 16, sizes.zero_points).astype(np.uint8)
    canonical = fmt.empty_canonical()
    canonical.codes[:] = codes
    canonical.scales[:] = scale_values.astype(np.float32)
    canonical.zero_points[:] = zp_values.astype(np.float32)
    expected = fmt.pack(canonical)
    out = humming.pack_device(mock_context, fmt, mock_context.to_device(codes),
                              scales=mock_context.to_device(scale_values),
                              zero_points=mock_context.to_device(zp_values))
    mock_context.synchronize()
    np.testing.assert_array_equal(out.weight.numpy(), expected.weight)
    np.testing.assert_array_equal(out.scales.numpy(), expected.scales)
    np.testing.assert_array_equal(out.zero_points.numpy(), expected.zero_points)
    # Codes only: the side tensors are left to the caller.
    weight_only = humming.pack_device(mock_context, fmt, mock_context.to_device(codes))
    assert weight_only.scales is None
    mock_context.synchronize()
    np.testing.assert_array_equal(weight_only.weight.numpy(), expected.weight)
    with pytest.raises(humming.InvalidArgumentError, match="'codes' has 5 codes"):
        humming.pack_device(mock_context, fmt, mock_context.to_device(codes[:5]))
    with pytest.raises(humming.InvalidArgumentError, match="4-byte elements"):
        humming.pack_device(mock_context, fmt, mock_context.to_device(codes),
                            scales=mock_context.to_device(scale_values.astype(np.float32)))


def test_close_waits_for_calls_in_flight(mock_context):
    """Calls run with the GIL released: close() on one thread must not destroy the handle while
    another thread is inside a call, and no call may start once close() has begun."""
    inside, release, closed = threading.Event(), threading.Event(), threading.Event()

    def hold():
        with mock_context.using():
            inside.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(10)
    closer = threading.Thread(target=lambda: (mock_context.close(), closed.set()))
    closer.start()
    assert not closed.wait(0.3), "close() did not wait for the call in flight"
    with pytest.raises(humming.Error, match="closed"):
        mock_context.alloc(16)  # close() has begun: the handle is no longer handed out
    release.set()
    holder.join(10)
    closer.join(10)
    assert closed.is_set() and mock_context.closed


def test_buffers_freed_on_other_threads_while_the_context_closes(cache_dir, mock_context):
    """DeviceArrays freed (explicitly, or by __del__) on other threads race the owner's close()."""
    for _ in range(10):
        ctx = humming.Context(0, cache_dir=cache_dir)
        arrays = [ctx.empty((64,), np.float32) for _ in range(16)]
        start = threading.Event()

        def free(a):
            start.wait(10)
            try:
                a.close()
            except humming.Error:
                pass  # the context closed first: refused, not a crash

        threads = [threading.Thread(target=free, args=(a,)) for a in arrays]
        for t in threads:
            t.start()
        start.set()
        ctx.close()
        for t in threads:
            t.join(10)


def test_quantize_activation_device_matches_host(mock_context):
    # The mock runs the quantizer's per-row rule on the host: bit for bit the host quantizer.
    a = (RNG.standard_normal((6, 203)) * 3).astype(np.float16)
    perm = RNG.permutation(203).astype(np.int32)
    for dtype, group_k, p in (("e4m3", 0, None), ("int8", 16, perm), ("e5m2", 128, None)):
        codes, scales = humming.quantize_activation_device(
            mock_context, mock_context.to_device(a), dtype, group_k=group_k,
            perm=None if p is None else mock_context.to_device(p))
        mock_context.synchronize()
        host_in = a.astype(np.float32) if p is None else np.ascontiguousarray(a.astype(np.float32)[:, p])
        want_codes, want_scales = humming.quantize_activation(dtype, host_in, group_k=group_k)
        np.testing.assert_array_equal(codes.numpy(), want_codes)
        np.testing.assert_array_equal(scales.numpy().view(np.uint32), want_scales.view(np.uint32))
    assert humming.activation_scale_groups(203, 16) == 13
    assert humming.activation_scale_groups(203, 0) == 1
    with pytest.raises(humming.InvalidArgumentError, match="multiple of 8"):
        humming.quantize_activation_device(mock_context, mock_context.to_device(a), "e4m3",
                                           group_k=12)
    with pytest.raises(humming.InvalidArgumentError, match="float16 or bfloat16"):
        humming.quantize_activation_device(mock_context, mock_context.to_device(
            a.astype(np.float32)), "e4m3")
    with pytest.raises(humming.UnsupportedError, match="int4"):
        humming.quantize_activation_device(mock_context, mock_context.to_device(a), "int4")


def test_moe_plan_routing_queries_and_gemm_checks(mock_context):
    """A MoE plan on the mock: the routing queries, moe_gemm's argument checks and a launch
    (the mock records it; tests/gpu/test_moe_gemm.cpp checks results on a GPU)."""
    fmt = Format("w=uint4b8 a=f16 c=f16 s=f16:g128 n=128 k=256 e=4")
    with mock_context.plan(fmt) as plan:
        plan.prepare()
        m, top_k = 5, 2
        block = plan.moe_block_size(m)
        rows = plan.moe_rows(m, top_k)
        assert block in (8, 16, 32, 64)
        assert rows == (m * top_k + 4 * (block - 1) + block - 1) // block * block
        w = RNG.standard_normal((4, 128, 256)).astype(np.float32)
        weight = humming.DevicePackedWeight.upload(mock_context, fmt.pack(fmt.quantize(w)))
        a = mock_context.empty((m, 256), np.float16)
        c = mock_context.empty((m * top_k, 128), np.float16)
        routing = dict(sorted_ids=mock_context.empty((rows,), np.int32),
                       expert_ids=mock_context.empty((rows // block,), np.int32),
                       num_tokens_padded=mock_context.empty((1,), np.int32))
        plan.moe_gemm(a, weight, c, top_k=top_k, **routing)
        mock_context.synchronize()
        with pytest.raises(humming.InvalidArgumentError, match=r"'c' has shape"):
            plan.moe_gemm(a, weight, mock_context.empty((m, 128), np.float16), top_k=top_k,
                          **routing)
        short = dict(routing, sorted_ids=mock_context.empty((rows - 8,), np.int32))
        with pytest.raises(humming.InvalidArgumentError, match="sorted_ids"):
            plan.moe_gemm(a, weight, c, top_k=top_k, **short)
        wrong = dict(routing, expert_ids=mock_context.empty((rows // block,), np.float32))
        with pytest.raises(humming.InvalidArgumentError, match="int32"):
            plan.moe_gemm(a, weight, c, top_k=top_k, **wrong)
        with pytest.raises(humming.InvalidArgumentError, match="top_k must be in"):
            plan.moe_gemm(a, weight, mock_context.empty((0, 128), np.float16), top_k=0,
                          **routing)
    with mock_context.plan(Format(PLAN_FORMAT)) as dense:
        with pytest.raises(humming.InvalidArgumentError, match="dense"):
            dense.moe_block_size(4)


def test_moe_grouped_modes_take_act_scales_per_row_of_a(mock_context):
    """8-bit activations on a MoE format (the mock launches, tests/gpu/test_moe_gemm.cpp checks
    results): the grouped calls take act_scales, one per row of a: M rows when contiguous, and
    E * T_max when masked (a [E, T_max, K] read as one [E * T_max, K] matrix)."""
    fmt = Format("w=uint4b8 a=e4m3 c=f16 s=f16:g128 n=128 k=256 e=4")
    with mock_context.plan(fmt) as plan:
        plan.prepare()
        w = RNG.standard_normal((4, 128, 256)).astype(np.float32)
        weight = humming.DevicePackedWeight.upload(mock_context, fmt.pack(fmt.quantize(w)))
        rows = 37
        a = mock_context.empty((rows, 256), np.uint8)
        c = mock_context.empty((rows, 128), np.float16)
        offsets = mock_context.to_device(np.array([0, 10, 10, 30, 37], np.int32))
        with pytest.raises(humming.InvalidArgumentError, match="'act_scales' is None"):
            plan.moe_gemm_contiguous(a, weight, c, expert_offsets=offsets)
        plan.moe_gemm_contiguous(a, weight, c, expert_offsets=offsets,
                                 act_scales=mock_context.empty((rows,), np.float32))
        t_max = 9
        a3 = mock_context.empty((4, t_max, 256), np.uint8)
        c3 = mock_context.empty((4, t_max, 128), np.float16)
        counts = mock_context.to_device(np.array([0, 9, 3, 100], np.int32))
        with pytest.raises(humming.InvalidArgumentError, match=r"'act_scales' has shape \(9,\)"):
            plan.moe_gemm_masked(a3, weight, c3, masked_m=counts,
                                 act_scales=mock_context.empty((t_max,), np.float32))
        plan.moe_gemm_masked(a3, weight, c3, masked_m=counts,
                             act_scales=mock_context.empty((4 * t_max,), np.float32))
        mock_context.synchronize()


def test_moe_plan_grouped_modes(mock_context):
    """The grouped MoE modes on the mock: moe_gemm_contiguous / moe_gemm_masked check their
    tensors and launch (results: tests/gpu/test_moe_gemm.cpp on a GPU)."""
    assert humming.ARG_EXPERT_OFFSETS == humming.raw.HM_ARG_EXPERT_OFFSETS == 12
    assert humming.ARG_MASKED_M == 13 and humming.ARG_MOE_MODE == 21
    assert (humming.MOE_MODE_INDEXED, humming.MOE_MODE_CONTIGUOUS, humming.MOE_MODE_MASKED) == \
        (0, 1, 2)
    fmt = Format("w=uint4b8 a=f16 c=f16 s=f16:g128 n=128 k=256 e=4")
    with mock_context.plan(fmt) as plan:
        plan.prepare()
        w = RNG.standard_normal((4, 128, 256)).astype(np.float32)
        weight = humming.DevicePackedWeight.upload(mock_context, fmt.pack(fmt.quantize(w)))
        rows = 37
        a = mock_context.empty((rows, 256), np.float16)
        c = mock_context.empty((rows, 128), np.float16)
        offsets = mock_context.to_device(np.array([0, 10, 10, 30, 37], np.int32))
        plan.moe_gemm_contiguous(a, weight, c, expert_offsets=offsets)
        mock_context.synchronize()
        with pytest.raises(humming.InvalidArgumentError, match="expert_offsets"):
            plan.moe_gemm_contiguous(a, weight, c, expert_offsets=mock_context.empty((4,), np.int32))
        with pytest.raises(humming.InvalidArgumentError, match="int32"):
            plan.moe_gemm_contiguous(a, weight, c,
                                     expert_offsets=mock_context.empty((5,), np.float32))
        with pytest.raises(humming.InvalidArgumentError, match=r"'c' has shape"):
            plan.moe_gemm_contiguous(a, weight, mock_context.empty((rows + 1, 128), np.float16),
                                     expert_offsets=offsets)
        t_max = 9
        a3 = mock_context.empty((4, t_max, 256), np.float16)
        c3 = mock_context.empty((4, t_max, 128), np.float16)
        counts = mock_context.to_device(np.array([0, 9, 3, 100], np.int32))
        plan.moe_gemm_masked(a3, weight, c3, masked_m=counts)
        mock_context.synchronize()
        with pytest.raises(humming.InvalidArgumentError, match=r"'a' has shape"):
            plan.moe_gemm_masked(mock_context.empty((3, t_max, 256), np.float16), weight, c3,
                                 masked_m=counts)
        with pytest.raises(humming.InvalidArgumentError, match="masked_m"):
            plan.moe_gemm_masked(a3, weight, c3, masked_m=mock_context.empty((3,), np.int32))
    with mock_context.plan(Format(PLAN_FORMAT)) as dense:
        with pytest.raises(humming.InvalidArgumentError, match="MoE format"):
            dense.moe_gemm_contiguous(a, None, c, expert_offsets=offsets)


def test_cache_prune_removes_entries_unused_for_the_age(tmp_path):
    # A cache entry laid out by hand, last used 30 days ago (pruning reads times and sizes only).
    entry = tmp_path / "v1" / "sm_90a" / "ab" / "ab01"
    entry.mkdir(parents=True)
    (entry / "kernel.cubin").write_bytes(b"x" * 100)
    (entry / "meta.json").write_text("{}")
    old = entry.stat().st_mtime - 30 * 86400
    os.utime(entry / "meta.json", (old, old))
    assert humming.cache_prune(max_age_seconds=86400, directory=tmp_path / "none") == (0, 0)
    assert humming.cache_prune(max_age_seconds=40 * 86400, directory=tmp_path) == (0, 0)
    assert humming.cache_prune(max_age_seconds=86400, directory=tmp_path) == (1, 102)
    assert not entry.exists()
