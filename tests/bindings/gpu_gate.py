#!/usr/bin/env python3
"""Runs a binding's GPU tests only where a CUDA device is present; elsewhere it exits with
CTest's skip code (77), so a machine without a GPU reports them as skipped, never as passed.

  gpu_gate.py LIBHUMMING COMMAND [ARGS...]
"""
import ctypes
import os
import sys

SKIP = 77


class RuntimeInfo(ctypes.Structure):
    # hm_runtime_info_t up to device_count (the library fills the whole struct it knows; this
    # reads only the leading fields, and passes a buffer large enough for all of them).
    _fields_ = [("struct_size", ctypes.c_uint32), ("driver_version", ctypes.c_int32),
                ("device_count", ctypes.c_int32), ("driver_path", ctypes.c_char * 512),
                ("driver_error", ctypes.c_char * 512)]


def device_count(library):
    lib = ctypes.CDLL(library)
    info_size = ctypes.sizeof(RuntimeInfo) + 8192  # room for the fields not declared above
    buffer = ctypes.create_string_buffer(info_size)
    lib.hm_runtime_info_init(buffer)
    info = RuntimeInfo.from_buffer(buffer)
    if lib.hm_runtime_info(buffer) != 0:
        return 0, "hm_runtime_info failed"
    return info.device_count, info.driver_error.decode(errors="replace")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    if os.environ.get("HUMMING_CUDA_DRIVER_PATH") or os.environ.get("HUMMING_MOCK_DRIVER"):
        print("SKIP: a driver override is set; GPU tests need the real driver")
        return SKIP
    count, why = device_count(sys.argv[1])
    if count <= 0:
        print(f"SKIP: no CUDA device ({why or 'device count is 0'})")
        return SKIP
    os.execvp(sys.argv[2], sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
