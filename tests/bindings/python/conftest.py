"""Shared setup of the Python binding tests (run by CTest, tests/bindings/tests.cmake).

HUMMING_PYTHON_PACKAGE: the folder holding the `humming` package built by CMake; it goes first on
sys.path, and the import is checked to come from there (never from an installed copy).
HUMMING_MOCK_DRIVER: the mock CUDA driver; when set, it stands in for libcuda for the whole
process (the driver is loaded once per process), so the mock tests run and the GPU tests skip.
HUMMING_HEADER: include/humming.h, for the tests that compare with the header.
"""
import os
import sys

import pytest

_PACKAGE = os.environ.get("HUMMING_PYTHON_PACKAGE")
if _PACKAGE:
    if not os.path.isfile(os.path.join(_PACKAGE, "humming", "raw.py")):
        raise RuntimeError(
            f"the Python module was not built into {_PACKAGE}: configure with SWIG 4 and the "
            "Python headers installed (HUMMING_BUILD_PYTHON=ON), then build")
    sys.path.insert(0, _PACKAGE)
if os.environ.get("HUMMING_MOCK_DRIVER"):
    os.environ["HUMMING_CUDA_DRIVER_PATH"] = os.environ["HUMMING_MOCK_DRIVER"]

import humming  # noqa: E402

if _PACKAGE:
    assert os.path.realpath(humming.__file__).startswith(os.path.realpath(_PACKAGE)), (
        f"imported humming from {humming.__file__}, not from {_PACKAGE}")


def header_path():
    path = os.environ.get("HUMMING_HEADER")
    if not path:
        path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "include", "humming.h")
    return path


@pytest.fixture
def header_text():
    with open(header_path()) as f:
        return f.read()


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    """A kernel cache for the test session (CTest points HUMMING_CACHE_DIR into the build tree,
    so compiled kernels are reused across runs)."""
    return os.environ.get("HUMMING_CACHE_DIR") or str(tmp_path_factory.mktemp("cache"))


@pytest.fixture
def mock_context(cache_dir):
    """A context on device 0 of the mock driver (skipped where the mock is not set up)."""
    if not os.environ.get("HUMMING_MOCK_DRIVER"):
        if os.environ.get("HUMMING_REQUIRE_MOCK"):  # CTest: never skip silently
            pytest.fail("HUMMING_REQUIRE_MOCK is set but HUMMING_MOCK_DRIVER is not")
        pytest.skip("HUMMING_MOCK_DRIVER is not set (CTest sets it)")
    with humming.Context(0, cache_dir=cache_dir) as ctx:
        yield ctx


@pytest.fixture
def gpu_context(cache_dir):
    """A context on a real GPU (device 0); skipped without one or under the mock driver."""
    if os.environ.get("HUMMING_MOCK_DRIVER"):
        pytest.skip("the mock driver is loaded in this process")
    info = humming.runtime_info()
    if info.device_count <= 0:
        pytest.skip(f"no CUDA device ({info.driver_error or 'device count is 0'})")
    with humming.Context(0, cache_dir=cache_dir) as ctx:
        yield ctx
