#!/usr/bin/env python3
"""Render dense GEMM benchmark results (bench_gemm --json) as Markdown tables and plots.

    python3 benchmarks/report.py benchmarks/results/h200/*.json --out /tmp/report

Reads the current bench_gemm files (schema 2: medians, percentiles, floor, cuBLAS in the same
run), the older bench_gemm files (host-clock means: us, gbps, tflops, kernel) and the separate
cuBLAS files of benchmarks/cublas_baseline.py ("benchmark": "cublas_f16"); other files are
skipped with a note. Per layer shape (N x K) it writes three tables with one row per variant and
one column per M (µs, ratio to the floor, ratio to cuBLAS), then one detail table per file.
With --out DIR it writes DIR/report.md and, when matplotlib is importable, one log-log plot of
µs against M per shape (DIR/gemm_n<N>_k<K>.png); without --out it prints the Markdown.

The floor of a call is max(bytes / copy bandwidth, FLOPs / peak). Files of schema 2 carry their
own; for older files it is recomputed from the bytes their GB/s implies, with --copy-tbps and
--peak-tflops (defaults: the H200 ceilings, 4.27 TB/s and 705 TFLOP/s). Standard library only,
plus matplotlib if present.
"""
import argparse
import json
import math
import os
import re
import sys

DEFAULT_COPY_TBPS = 4.27
DEFAULT_PEAK_TFLOPS = 705.0


def shape_of(data):
    """(n, k) from the file's own fields, else from its format string; None if neither says."""
    if isinstance(data.get("n"), int) and isinstance(data.get("k"), int):
        return data["n"], data["k"]
    fmt = data.get("format") or ""
    n = re.search(r"\bn=(\d+)", fmt)
    k = re.search(r"\bk=(\d+)", fmt)
    if n and k:
        return int(n.group(1)), int(k.group(1))
    return None


def number(value):
    """A finite float, or None (JSON null, missing, or not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def ratio(a, b):
    return a / b if a is not None and b else None


class Series:
    """One line of a table: a name and µs per M, with the detail rows behind it."""

    def __init__(self, name, shape, kind, source):
        self.name = name
        self.shape = shape
        self.kind = kind  # "humming" or "cublas"
        self.source = source
        self.rows = {}  # m -> dict of derived numbers
        self.meta = {}

    def us(self, m):
        row = self.rows.get(m)
        return row.get("us") if row else None


def load_dense(path, data, args):
    """A bench_gemm file -> its Humming series and, for schema 2, its cuBLAS series."""
    shape = shape_of(data)
    label = data.get("label") or os.path.splitext(os.path.basename(path))[0]
    schema = data.get("schema", 1)
    options = data.get("options") or {}
    copy_tbps = number(options.get("copy_tbps")) or args.copy_tbps
    peak_tflops = number(options.get("peak_tflops")) or args.peak_tflops
    hm = Series(label, shape, "humming", path)
    hm.meta = {
        "format": data.get("format", "?"),
        "device": data.get("device", "?"),
        "timing": data.get("timing", "?"),
        "date": data.get("date"),
        "schema": schema,
        "copy_tbps": copy_tbps,
        "peak_tflops": peak_tflops,
    }
    cb = Series("cuBLAS " + ((data.get("cublas") or {}).get("dtype") or "f16") + " (" + label + ")",
                shape, "cublas", path)
    for r in data.get("results", []):
        m = r.get("m")
        if not isinstance(m, int):
            continue
        us = number(r.get("us"))
        gbps, tflops = number(r.get("gbps")), number(r.get("tflops"))
        bytes_ = number(r.get("bytes"))
        if bytes_ is None and gbps is not None and us is not None:
            bytes_ = gbps * us * 1e3  # GB/s = bytes / µs / 1e3
        flops = number(r.get("flops"))
        if flops is None and shape is not None:
            flops = 2.0 * m * shape[0] * shape[1]
        floor = number(r.get("floor_us"))
        if floor is None and bytes_ is not None and flops is not None:
            floor = max(bytes_ / (copy_tbps * 1e6), flops / (peak_tflops * 1e6))
        if gbps is None and bytes_ is not None and us:
            gbps = bytes_ / us / 1e3
        if tflops is None and flops is not None and us:
            tflops = flops / us / 1e6
        hm.rows[m] = {
            "us": us,
            "p10": number(r.get("us_p10")),
            "p90": number(r.get("us_p90")),
            "gbps": gbps,
            "tflops": tflops,
            "floor": floor,
            "cublas": number(r.get("cublas_us")),
            "kernel": r.get("kernel") or "",
            "error": r.get("error"),
        }
        cbus = number(r.get("cublas_us"))
        if cbus is not None:
            cb.rows[m] = {"us": cbus, "p10": number(r.get("cublas_us_p10")),
                          "p90": number(r.get("cublas_us_p90"))}
    return [hm] + ([cb] if cb.rows else [])


def load_cublas_file(path, data):
    shape = (data["n"], data["k"]) if "n" in data and "k" in data else None
    s = Series("cuBLAS f16 (" + os.path.splitext(os.path.basename(path))[0] + ")", shape, "cublas", path)
    for r in data.get("results", []):
        if isinstance(r.get("m"), int) and number(r.get("us")) is not None:
            s.rows[r["m"]] = {"us": number(r["us"])}
    s.meta = {"standalone": True}
    return [s]


def load(paths, args):
    series, notes = [], []
    for path in paths:
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            notes.append(f"skipped {path}: {e}")
            continue
        kind = data.get("benchmark") if isinstance(data, dict) else None
        if kind == "dense_gemm":
            series += load_dense(path, data, args)
        elif kind == "cublas_f16":
            series += load_cublas_file(path, data)
        else:
            notes.append(f"skipped {path}: not a dense GEMM result (benchmark={kind!r})")
    return series, notes


def fmt(value, spec):
    # Sub-microsecond floors of tiny layers would all print as 0.0.
    if value is not None and spec == ".1f" and abs(value) < 1:
        spec = ".2f"
    return "—" if value is None else format(value, spec)


def cublas_source(hm, all_series):
    """The cuBLAS series to compare a Humming series with: the one measured in its own run, else
    a separate cuBLAS file of its shape (what the older files were paired with), else another
    run's in-process baseline of the same shape; None when there is none."""
    same_shape = [s for s in all_series if s.kind == "cublas" and s.shape == hm.shape]
    for s in same_shape:
        if s.source == hm.source:
            return s
    for s in same_shape:
        if s.meta.get("standalone"):
            return s
    return same_shape[0] if same_shape else None


def cublas_for(hm, all_series):
    """The cuBLAS µs per M for a Humming series (see cublas_source)."""
    s = cublas_source(hm, all_series)
    return {m: r["us"] for m, r in s.rows.items()} if s else {}


def shape_tables(shape, series, all_series):
    n, k = shape if shape else ("?", "?")
    ms = sorted({m for s in series for m in s.rows})
    head = "| variant | " + " | ".join(str(m) for m in ms) + " |\n"
    rule = "|---|" + "---|" * len(ms) + "\n"
    out = [f"## Dense N={n}, K={k}\n"]

    out.append("\nµs per call (median; older files: host-clock mean)\n\n" + head + rule)
    for s in series:
        out.append(f"| {s.name} | " + " | ".join(fmt(s.us(m), ".1f") for m in ms) + " |\n")
    hms = [s for s in series if s.kind == "humming"]
    for s in hms:
        out.append(f"| floor ({s.name}) | " +
                   " | ".join(fmt(s.rows.get(m, {}).get("floor"), ".1f") for m in ms) + " |\n")

    out.append("\nratio to the floor (1.00 is the ceiling; higher is slower)\n\n" + head + rule)
    for s in hms:
        out.append(f"| {s.name} | " + " | ".join(
            fmt(ratio(s.us(m), s.rows.get(m, {}).get("floor")), ".2f") for m in ms) + " |\n")

    out.append("\nratio Humming / cuBLAS (below 1.00: Humming is faster)\n\n" + head + rule)
    for s in hms:
        cb = cublas_for(s, all_series)
        out.append(f"| {s.name} | " + " | ".join(fmt(ratio(s.us(m), cb.get(m)), ".2f") for m in ms) + " |\n")
    return "".join(out)


def detail_table(s, all_series):
    meta = s.meta
    cb = cublas_for(s, all_series)
    cb_source = cublas_source(s, all_series)
    cb_note = ("cuBLAS: none" if cb_source is None else
               "cuBLAS: same run" if cb_source.source == s.source else
               f"cuBLAS: `{cb_source.source}` (another run)")
    out = [f"\n### {s.name}\n\n",
           f"`{meta['format']}` on {meta['device']}" + (f", {meta['date']}" if meta.get("date") else "") +
           f"; {meta['timing']}; {cb_note}; source `{s.source}`\n\n",
           "| M | µs | p10–p90 | GB/s | TFLOP/s | floor µs | ×floor | cuBLAS µs | ×cuBLAS | plan |\n",
           "|---|---|---|---|---|---|---|---|---|---|\n"]
    for m in sorted(s.rows):
        r = s.rows[m]
        spread = (f"{r['p10']:.1f}–{r['p90']:.1f}" if r.get("p10") is not None and r.get("p90") is not None
                  else "—")
        plan = r["kernel"] if not r.get("error") else "failed: " + r["error"]
        out.append(f"| {m} | {fmt(r['us'], '.1f')} | {spread} | {fmt(r['gbps'], '.0f')} | "
                   f"{fmt(r['tflops'], '.1f')} | {fmt(r['floor'], '.1f')} | {fmt(ratio(r['us'], r['floor']), '.2f')} | "
                   f"{fmt(cb.get(m), '.1f')} | {fmt(ratio(r['us'], cb.get(m)), '.2f')} | {plan.replace('|', '/')} |\n")
    return "".join(out)


def render(series):
    shapes = []
    for s in series:
        if s.shape not in shapes:
            shapes.append(s.shape)
    parts = ["# Dense GEMM results\n\n",
             "Floor = max(bytes moved / copy bandwidth, FLOPs / peak); the ratio to it is how far a call is "
             "from the best any kernel could do on this card.\n\n"]
    for shape in shapes:
        group = [s for s in series if s.shape == shape]
        parts.append(shape_tables(shape, group, series))
        for s in group:
            if s.kind == "humming":
                parts.append(detail_table(s, series))
        parts.append("\n")
    return "".join(parts)


def plot(series, out_dir):
    """One log-log PNG of µs against M per shape; returns the paths, or None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    paths = []
    shapes = []
    for s in series:
        if s.shape not in shapes:
            shapes.append(s.shape)
    for shape in shapes:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for s in series:
            if s.shape != shape:
                continue
            ms = [m for m in sorted(s.rows) if s.us(m)]
            if not ms:
                continue
            style = "--" if s.kind == "cublas" else "-"
            ax.plot(ms, [s.us(m) for m in ms], style, marker="o", markersize=3, label=s.name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("M (tokens)")
        ax.set_ylabel("µs per call")
        name = f"N={shape[0]}, K={shape[1]}" if shape else "unknown shape"
        ax.set_title("Dense GEMM, " + name)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        stem = f"gemm_n{shape[0]}_k{shape[1]}" if shape else "gemm_unknown_shape"
        path = os.path.join(out_dir, stem + ".png")
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="result JSON files")
    ap.add_argument("--out", help="directory for report.md and the plots (default: print Markdown)")
    ap.add_argument("--copy-tbps", type=float, default=DEFAULT_COPY_TBPS,
                    help="copy bandwidth for the floor of files that do not carry one (TB/s)")
    ap.add_argument("--peak-tflops", type=float, default=DEFAULT_PEAK_TFLOPS,
                    help="peak for the floor of files that do not carry one (TFLOP/s)")
    args = ap.parse_args(argv)
    series, notes = load(args.files, args)
    for note in notes:
        print(note, file=sys.stderr)
    if not series:
        print("no dense GEMM results in the given files", file=sys.stderr)
        return 1
    text = render(series)
    if not args.out:
        sys.stdout.write(text)
        print("(no plots without --out DIR)", file=sys.stderr)
        return 0
    os.makedirs(args.out, exist_ok=True)
    md = os.path.join(args.out, "report.md")
    with open(md, "w") as f:
        f.write(text)
    print("wrote " + md)
    pngs = plot(series, args.out)
    if pngs is None:
        print("matplotlib is not importable: no plots (the tables are in report.md)")
    else:
        for p in pngs:
            print("wrote " + p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
