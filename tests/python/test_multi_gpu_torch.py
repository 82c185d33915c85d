"""Tensor parallelism through humming.torch on 2 GPUs (issue #7): a layer split by rows (each rank
holds K / 2 input columns of W, quantized on its own as a checkpoint converter does per rank),
one process per GPU, the partial outputs summed with torch.distributed.all_reduce over NCCL (the
engine's reduction; the library provides none), compared with the f64 product of the float
weights, and with the unsharded quantized layer as the yardstick for the quantization error.

CTest runs this file as a script (tests/python/tests.cmake): it exits 77, CTest's skip code,
where the test cannot run (no torch, no NCCL, fewer than 2 CUDA devices, a driver override), so
such machines report it skipped, never passed; otherwise it runs pytest on itself. Run directly
under pytest it skips the same way.

HUMMING_PYTHON_PACKAGE: the folder holding the built `humming` package (put first on sys.path).
"""
import os
import sys

import pytest

SKIP = 77
WORLD = 2
FORMAT = "w=uint4b8 a=f16 c=f16 s=f16:g128"
N, K, M = 512, 2048, 37
# The reduced result may be at most 5% (plus the extra f16 rounding of the partial outputs) further
# from the float weights than the unsharded quantized layer is.
SLACK, EPSILON = 1.05, 1e-3

_PACKAGE = os.environ.get("HUMMING_PYTHON_PACKAGE")
if _PACKAGE:
    sys.path.insert(0, _PACKAGE)


def why_not_runnable():
    """None when the test can run here, else the reason it cannot."""
    if os.environ.get("HUMMING_CUDA_DRIVER_PATH") or os.environ.get("HUMMING_MOCK_DRIVER"):
        return "a driver override is set; the test needs the real driver"
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        return f"torch is not importable ({e})"
    if torch.cuda.device_count() < WORLD:
        return f"needs {WORLD} CUDA devices, torch sees {torch.cuda.device_count()}"
    if not dist.is_available() or not dist.is_nccl_available():
        return "torch.distributed with NCCL is not available"
    return None


def _inputs():
    """The full float weight and the activations, identical on every rank (seeded, on the host)."""
    import torch
    g = torch.Generator().manual_seed(7)
    w = torch.randn(N, K, generator=g) * 0.05
    x = torch.randn(M, K, generator=g).half()
    return w, x


def _linear(weight):
    import torch
    linear = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    with torch.no_grad():
        linear.weight.copy_(weight)
    return linear


def _relative_error(got, ref):
    return ((got.double() - ref).norm() / ref.norm()).item()


def _rank_main(rank, init_file):
    """One rank: its shard on cuda:<rank>, the all_reduce, and the checks (an assertion here fails
    the spawning test with this rank's traceback)."""
    import torch
    import torch.distributed as dist
    import humming.torch as hmt

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"file://{init_file}", rank=rank,
                            world_size=WORLD)
    try:
        device = torch.device("cuda", rank)
        w, x = _inputs()
        k0, k1 = rank * K // WORLD, (rank + 1) * K // WORLD
        shard = hmt.Linear.from_linear(_linear(w[:, k0:k1]), FORMAT, max_m=64, device=device)
        assert shard.context.device == rank, "the shard's humming context is on another device"
        x_part = x[:, k0:k1].contiguous().to(device)
        partial = shard(x_part)
        assert partial.device == device and partial.dtype == torch.float16

        # The shard against its own dequantized weight: the GEMM on this GPU is right.
        deq = shard.format.dequantize(shard.format.quantize(w[:, k0:k1].contiguous().numpy()))
        own = x_part.double() @ torch.from_numpy(deq).to(device).double().T
        assert _relative_error(partial, own) < 2e-3, f"rank {rank}: shard GEMM"

        reduced = partial.float()
        dist.all_reduce(reduced, op=dist.ReduceOp.SUM)

        # Every rank holds the same sum; the yardstick is the unsharded quantized layer.
        gathered = [torch.empty_like(reduced) for _ in range(WORLD)]
        dist.all_gather(gathered, reduced)
        for r in range(1, WORLD):
            assert torch.equal(gathered[0], gathered[r]), f"ranks 0 and {r} reduced differently"
        ref = x.double().to(device) @ w.double().to(device).T
        full = hmt.Linear.from_linear(_linear(w), FORMAT, max_m=64, device=device)
        full_error = _relative_error(full(x.to(device)), ref)
        tp_error = _relative_error(reduced, ref)
        assert tp_error <= SLACK * full_error + EPSILON, (
            f"rank {rank}: row-split error {tp_error:.4f} vs unsharded {full_error:.4f}")
        torch.cuda.synchronize(device)
    finally:
        dist.destroy_process_group()


def test_row_split_layer_all_reduced_over_nccl(tmp_path):
    reason = why_not_runnable()
    if reason:
        pytest.skip(reason)
    import torch.multiprocessing as mp
    mp.spawn(_rank_main, args=(str(tmp_path / "rendezvous"),), nprocs=WORLD, join=True)


if __name__ == "__main__":
    reason = why_not_runnable()
    if reason:
        print(f"SKIP: {reason}")
        sys.exit(SKIP)
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-rs", __file__]))
