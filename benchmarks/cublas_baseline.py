"""Vendor baselines for the dense shapes, timed in the same GPU session as bench_gemm.

--dtype f16 (default): torch.matmul (cuBLAS) on f16 A and W.
--dtype fp8: torch._scaled_mm (cuBLASLt) on e4m3 A [M, K] and W [N, K] with row-wise f32 scales
  (one per token, one per output channel) and a bf16 output: the W8A8 FP8 baseline of
  ../shared/anchors/h200.md ("cuBLASLt FP8 row-wise").
--dtype int8: torch._int_mm (cuBLASLt INT8, s32 output) on int8 A and W; the per-token and
  per-channel scales are not applied (torch has no fused int8 GEMM with them), so the number is a
  lower bound for a W8A8 INT8 layer.

Each M runs under CUDA-graph replay with triton.testing.do_bench (L2 flushed, median), the method
of ../shared/anchors/h200.md. Where a kernel refuses a small M (torch._int_mm wants M > 16, and
_scaled_mm M a multiple of 16 on some builds), the GEMM runs with M rounded up and the JSON says
so in "m_run": the time is that of the larger GEMM. Prints a table; --json writes the numbers.
"""
import argparse
import json

import torch
import triton.testing


def make_gemm(dtype, m, n, k):
    """A closure running one GEMM of the given kind on fresh operands of M = m rows."""
    if dtype == "f16":
        x = torch.randn(m, k, device="cuda", dtype=torch.float16)
        w = torch.randn(n, k, device="cuda", dtype=torch.float16)
        return lambda: x @ w.T
    if dtype == "fp8":
        x = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        sx = torch.rand(m, 1, device="cuda", dtype=torch.float32) + 0.5
        sw = torch.rand(1, n, device="cuda", dtype=torch.float32) + 0.5
        # _scaled_mm takes the second operand column-major: W^T of the row-major [N, K] W.
        return lambda: torch._scaled_mm(x, w.T, scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)
    if dtype == "int8":
        x = torch.randint(-128, 128, (m, k), device="cuda", dtype=torch.int8)
        w = torch.randint(-128, 128, (n, k), device="cuda", dtype=torch.int8)
        return lambda: torch._int_mm(x, w.T)
    raise ValueError(dtype)


def runnable_m(dtype, m, n, k):
    """The smallest M >= m the kernel accepts here (tried, not assumed), and its closure."""
    candidates = [m] + [c for c in (16 * ((m + 15) // 16), 17, 32) if c > m]
    last = None
    for c in candidates:
        try:
            gemm = make_gemm(dtype, c, n, k)
            gemm()
            torch.cuda.synchronize()
            return c, gemm
        except RuntimeError as e:  # the shape is refused: try the next
            last = e
    raise RuntimeError(f"{dtype} GEMM refused M = {m} and its roundings: {last}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--k", type=int, default=8192)
    ap.add_argument("--ms", default="1,16,64,128,512,2048,8192,16384")
    ap.add_argument("--dtype", choices=("f16", "fp8", "int8"), default="f16")
    ap.add_argument("--json")
    args = ap.parse_args()
    names = {"f16": "cublas_f16", "fp8": "cublaslt_fp8_rowwise", "int8": "cublaslt_int8_int_mm"}
    rows = []
    for m in [int(x) for x in args.ms.split(",")]:
        m_run, gemm = runnable_m(args.dtype, m, args.n, args.k)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            gemm()
        us = triton.testing.do_bench(lambda: g.replay(), return_mode="median") * 1e3
        rows.append({"m": m, "m_run": m_run, "us": us})
        note = f" (run as M={m_run})" if m_run != m else ""
        print(f"{names[args.dtype]} {args.n}x{args.k} M={m:6d}: {us:9.1f} us{note}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": names[args.dtype], "n": args.n, "k": args.k, "results": rows},
                      f, indent=2)


if __name__ == "__main__":
    main()
