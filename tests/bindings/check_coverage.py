#!/usr/bin/env python3
"""Fails when include/humming.h declares a function or constant that a binding does not cover.

The header is parsed at test time, so a function added to it shows up here as a failure until
every binding has its counterpart:
  python  every function is in the SWIG module humming.raw and is called by the Pythonic layer
          (humming/*.py); every object-like HM_* macro is a constant of humming.raw
  rust    every function is in humming-sys (src/bindings.rs) and is called by the safe crate
          (humming/src); every constant is in humming-sys
  go      every function and constant is used by the cgo package (non-test .go files)
A struct's two initializers (hm_X_init and hm_X_init_sized, humming.h) count as one function:
a binding calls the sized one where its language knows the struct's size (Rust, Go), the other
where it does not (Python's SWIG structs, built with the library).

  check_coverage.py HEADER {python PACKAGE_DIR | rust RUST_DIR | go GO_DIR}
"""
import glob
import importlib
import os
import re
import sys


def header_api(path):
    with open(path) as f:
        text = re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)
    functions = re.findall(r"\bHM_API\b[^;{]*?\b(hm_[a-z0-9_]+)\s*\(", text)
    # Object-like macros only: "#define HM_X value" (function-like ones have "(" right after).
    constants = re.findall(r"^\s*#\s*define\s+(HM_[A-Z0-9_]+)(?!\()\s+\S", text, flags=re.M)
    constants = [c for c in constants if c != "HM_API"]
    if len(functions) < 50 or len(constants) < 50:
        sys.exit(f"parsed only {len(functions)} functions and {len(constants)} constants from "
                 f"{path}: the parser is out of date")
    return sorted(set(functions)), sorted(set(constants))


def read_all(pattern, exclude=lambda p: False):
    paths = [p for p in sorted(glob.glob(pattern, recursive=True)) if not exclude(p)]
    if not paths:
        sys.exit(f"no sources match {pattern}")
    return "\n".join(open(p).read() for p in paths)


def uses(text, name):
    return re.search(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])", text) is not None


def check_python(functions, constants, package_dir):
    sys.path.insert(0, package_dir)
    raw = importlib.import_module("humming.raw")
    layer = read_all(os.path.join(package_dir, "humming", "*.py"),
                     exclude=lambda p: os.path.basename(p) == "raw.py")
    problems = [f"humming.raw lacks {f}" for f in functions if not hasattr(raw, f)]
    problems += [f"the Pythonic layer (humming/*.py) never calls raw.{f}" for f in functions
                 if not re.search(r"\braw\." + f + r"\b", layer)]
    problems += [f"humming.raw lacks the constant {c}" for c in constants if not hasattr(raw, c)]
    return problems


def check_rust(functions, constants, rust_dir):
    sys_text = read_all(os.path.join(rust_dir, "humming-sys", "src", "*.rs"))
    safe = read_all(os.path.join(rust_dir, "humming", "src", "**", "*.rs"))
    problems = [f"humming-sys lacks fn {f}" for f in functions
                if not re.search(r"pub fn " + f + r"\s*\(", sys_text)]
    problems += [f"the safe crate (humming/src) never calls {f}" for f in functions
                 if not uses(safe, f)]
    problems += [f"humming-sys lacks the constant {c}" for c in constants
                 if not re.search(r"pub const " + c + r"\s*:", sys_text)]
    return problems


def check_go(functions, constants, go_dir):
    text = read_all(os.path.join(go_dir, "*.go"), exclude=lambda p: p.endswith("_test.go"))
    problems = [f"the Go package never calls {f}" for f in functions
                if not (uses(text, "C." + f) or re.search(r"\b" + f + r"\s*\(", text))]
    problems += [f"the Go package does not export {c} (no C.{c})" for c in constants
                 if not uses(text, "C." + c)]
    return problems


def initializer_pairs(functions):
    """Maps each hm_X_init_sized to its hm_X_init (one function for coverage)."""
    return {f: f[:-len("_sized")] for f in functions
            if f.endswith("_init_sized") and f[:-len("_sized")] in functions}


def main():
    if len(sys.argv) != 4 or sys.argv[2] not in ("python", "rust", "go"):
        sys.exit(__doc__)
    functions, constants = header_api(sys.argv[1])
    check = {"python": check_python, "rust": check_rust, "go": check_go}[sys.argv[2]]
    problems = check(functions, constants, sys.argv[3])
    # An initializer pair is covered when either of its two is.
    pairs = initializer_pairs(functions)
    missing = {p.split()[-1].split(".")[-1]: p for p in problems}
    for sized, plain in pairs.items():
        if (sized in missing) != (plain in missing):
            problems.remove(missing[sized] if sized in missing else missing[plain])
    for p in problems:
        print("MISSING:", p)
    print(f"{sys.argv[2]}: {len(functions)} functions and {len(constants)} constants in the header, "
          f"{len(problems)} not covered")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
