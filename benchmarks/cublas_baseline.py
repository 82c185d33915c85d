"""cuBLAS f16 baseline for the dense shapes, timed in the same GPU session as bench_gemm.

torch.matmul (cuBLAS) with CUDA-graph replay under triton.testing.do_bench (L2 flushed, median),
the method of ../shared/anchors/h200.md. Prints a table; --json writes the numbers.
"""
import argparse
import json

import torch
import triton.testing


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--k", type=int, default=8192)
    ap.add_argument("--ms", default="1,16,64,128,512,2048,8192,16384")
    ap.add_argument("--json")
    args = ap.parse_args()
    w = torch.randn(args.n, args.k, device="cuda", dtype=torch.float16)
    rows = []
    for m in [int(x) for x in args.ms.split(",")]:
        x = torch.randn(m, args.k, device="cuda", dtype=torch.float16)
        out = x @ w.T
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = x @ w.T
        us = triton.testing.do_bench(lambda: g.replay(), return_mode="median") * 1e3
        rows.append({"m": m, "us": us})
        print(f"cublas f16 {args.n}x{args.k} M={m:6d}: {us:9.1f} us")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "cublas_f16", "n": args.n, "k": args.k, "results": rows}, f, indent=2)


if __name__ == "__main__":
    main()
