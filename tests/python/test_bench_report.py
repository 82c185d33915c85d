"""The benchmark reporting path without a GPU: bench_gemm's options and JSON (through --dry-run,
which runs everything but the timing) and benchmarks/report.py on that file plus the older result
files in benchmarks/results/h200 (schema 1 and the separate cuBLAS file).

BENCH_GEMM names the bench_gemm executable (CTest sets it)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPORT = os.path.join(ROOT, "benchmarks", "report.py")
OLD = os.path.join(ROOT, "benchmarks", "results", "h200")
BENCH = os.environ.get("BENCH_GEMM")


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def bench():
    assert BENCH and os.path.exists(BENCH), "set BENCH_GEMM to the bench_gemm executable"
    return BENCH


def test_help_and_bad_options(bench):
    r = run(bench, "--help")
    assert r.returncode == 0 and "--tuning FILE" in r.stdout and "--no-graph" in r.stdout
    assert run(bench, "--iters", "0").returncode == 2
    assert run(bench, "--ms", "1,x").returncode == 2
    assert run(bench, "--bogus").returncode == 2
    assert run(bench, "--format").returncode == 2  # a value is missing


def test_dry_run_json_and_report(bench, tmp_path):
    out = tmp_path / "dry.json"
    tuning = tmp_path / "tuning.json"
    tuning.write_text('{"note": "a \\"quoted\\" value"}\n')
    r = run(bench, "--dry-run", "--ms", "1,16,2048", "--label", "dry \"x\"", "--tuning", str(tuning),
            "--copy-tbps", "4", "--peak-tflops", "500", "--json", str(out))
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert data["benchmark"] == "dense_gemm" and data["schema"] == 2
    assert data["n"] == 8192 and data["k"] == 8192 and data["label"] == 'dry "x"'
    assert data["options"]["tuning_json"] == tuning.read_text()
    assert data["options"]["copy_tbps"] == 4 and data["options"]["peak_tflops"] == 500
    rows = {row["m"]: row for row in data["results"]}
    assert sorted(rows) == [1, 16, 2048]
    # uint4 g128 on 8192 x 8192: 32 MiB of codes, 1 MiB of f16 scales, plus A and C in f16.
    one = rows[1]
    assert one["bytes"] == 8192 * 8192 // 2 + 8192 * 64 * 2 + 2 * 8192 + 2 * 8192
    assert one["floor_us"] == pytest.approx(max(one["bytes"] / 4e6, one["flops"] / 500e6), rel=1e-3)
    assert one["ratio_to_floor"] == pytest.approx(1.5, rel=1e-3)
    assert one["ratio_to_cublas"] == pytest.approx(0.75, rel=1e-3)
    big = rows[2048]
    assert big["flops"] == 2 * 2048 * 8192 * 8192

    report_dir = tmp_path / "report"
    old = sorted(os.path.join(OLD, f) for f in os.listdir(OLD) if f.endswith(".json"))
    r = run(sys.executable, REPORT, str(out), *old, "--out", str(report_dir))
    assert r.returncode == 0, r.stderr
    md = (report_dir / "report.md").read_text()
    assert "## Dense N=8192, K=8192" in md and "## Dense N=28672, K=4096" in md
    # The dry run's own ratios, and an older file joined with the separate cuBLAS file:
    # 57.95 us / 49.344 us at M = 1.
    # Columns are every M of the shape (1 ... 16384); the dry run has 1, 16 and 2048.
    assert '| dry "x" | 1.50 | 1.50 | — | — | — | 1.50 | — | — |' in md
    assert '| dry "x" | 0.75 | 0.75 | — | — | — | 0.75 | — | — |' in md
    assert "| gemm_int4_g128_f16_v3 | 1.17 |" in md
    assert "jit.json" in r.stderr  # not a GEMM file: skipped with a note
    has_mpl = subprocess.run([sys.executable, "-c", "import matplotlib"]).returncode == 0
    assert (report_dir / "gemm_n8192_k8192.png").exists() == has_mpl
    if not has_mpl:
        assert "matplotlib is not importable" in r.stdout
