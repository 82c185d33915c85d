#!/usr/bin/env bash
# Builds the Python binding's SWIG module with one given SWIG executable, beside the package that
# CMake built, and runs the binding's host and mock-driver tests against it. The main build uses
# whichever SWIG CMake found (Debian's); this test pins the two ends of what find_package(SWIG 4.0)
# accepts, so an interface that only one SWIG generation compiles fails here (issue 14: SWIG 4.3
# changed SWIG_Python_AppendOutput's arity).
#   python_swig_version.sh SWIG PYTHON HEADER_DIR RAW_I PACKAGE_DIR LIBRARY WORK_DIR TESTS_DIR
set -euo pipefail
swig=$1 python=$2 header_dir=$3 raw_i=$4 package_dir=$5 library=$6 work=$7 tests=$8

if [ ! -x "$swig" ]; then
  echo "SWIG not found at $swig (scripts/setup.sh installs the pinned PyPI SWIGs)" >&2
  exit 1
fi
version=$("$swig" -version | sed -n 's/^SWIG Version //p')
echo "SWIG $version ($swig)"

rm -rf "$work"
mkdir -p "$work/humming" "$work/swig"
"$swig" -python -threads -I"$header_dir" -outdir "$work/humming" -o "$work/swig/raw_wrap.c" "$raw_i"

py_include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
py_suffix=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
cc=${CC:-cc}
# -Werror=implicit-function-declaration and an error on any diagnostic about argument counts:
# the failure this test exists for was "too few arguments to function".
"$cc" -shared -fPIC -O1 -fvisibility=hidden -Werror=implicit-function-declaration \
  -I"$py_include" -I"$header_dir" "$work/swig/raw_wrap.c" \
  -L"$(dirname "$library")" -l:"$(basename "$library")" -Wl,-rpath,"$(dirname "$library")" \
  -o "$work/humming/_raw$py_suffix"

# The hand-written package files from the CMake build, then the tests that need no GPU.
for f in "$package_dir"/humming/*.py; do
  [ "$(basename "$f")" = raw.py ] || cp "$f" "$work/humming/"
done
HUMMING_PYTHON_PACKAGE="$work" PYTHONDONTWRITEBYTECODE=1 \
  "$python" -m pytest -q -p no:cacheprovider -rs "$tests" \
  --ignore="$tests/test_gpu_plan.py" --ignore="$tests/test_gpu_torch.py" \
  --ignore="$tests/test_gpu_torch_moe.py"
