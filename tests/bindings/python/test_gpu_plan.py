"""GPU runs through the Python bindings (skipped without a GPU; CTest runs this file only where
a device is present, tests/bindings/tests.cmake): the reference kernel and a plan's GEMM against
the host reference."""
import numpy as np

import humming
from humming import Format

RNG = np.random.default_rng(5)


def test_reference_kernel_f16_exact(gpu_context):
    a = RNG.integers(-3, 4, (33, 64)).astype(np.float16)
    b = RNG.integers(-3, 4, (47, 64)).astype(np.float16)
    expected = humming.reference_gemm(a.astype(np.float32), b.astype(np.float32))
    kernel = gpu_context.reference_gemm_kernel("f16", "f32")
    c = gpu_context.empty((33, 47), np.float32)
    kernel(gpu_context.to_device(a), gpu_context.to_device(b), c)
    gpu_context.synchronize()
    np.testing.assert_array_equal(c.numpy(), expected)  # small integers: exact in f32


def test_plan_gemm_matches_the_dequantized_reference(gpu_context):
    n, k = 256, 512
    fmt = Format(f"w=uint4b8 a=f16 c=f16 s=f16:g128 n={n} k={k}")
    w = RNG.standard_normal((n, k)).astype(np.float32)
    q = fmt.quantize(w)
    weight = humming.DevicePackedWeight.upload(gpu_context, fmt.pack(q))
    with gpu_context.plan(fmt, max_m=64) as plan:
        plan.prepare()
        workspace = plan.allocate_workspace()
        for m in (1, 16, 37, 64):
            a = RNG.standard_normal((m, k)).astype(np.float16)
            expected = humming.reference_gemm(a.astype(np.float32), fmt.dequantize(q))
            c = gpu_context.empty((m, n), np.float16)
            plan.gemm(gpu_context.to_device(a), weight, c, workspace=workspace)
            gpu_context.synchronize()
            got = c.numpy().astype(np.float32)
            error = np.linalg.norm(got - expected) / np.linalg.norm(expected)
            assert error < 2e-3, f"M={m}: relative error {error:.2e} ({plan.describe(m)})"
