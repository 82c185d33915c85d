"""Versions, statuses and errors: the exception carries the status, its name and the library's
thread-local message, read on the thread that failed."""
import re
import threading

import pytest

import humming
from humming import raw


def test_version_matches_header(header_text):
    parts = {k: int(v) for k, v in re.findall(r"#define HM_VERSION_(MAJOR|MINOR|PATCH) (\d+)",
                                              header_text)}
    assert humming.version() == (parts["MAJOR"], parts["MINOR"], parts["PATCH"])
    assert humming.__version__ == "%d.%d.%d" % humming.version()
    abi = int(re.search(r"#define HM_ABI_VERSION (\d+)", header_text).group(1))
    assert humming.abi_version() == abi


def test_status_names_match_header_constants(header_text):
    codes = re.findall(r"#define HM_((?:SUCCESS|ERROR_[A-Z_]+)) (\d+)", header_text)
    assert len(codes) > 20
    for name, value in codes:
        assert humming.status_name(int(value)) == name
        assert getattr(humming, name) == int(value)
    assert humming.status_name(12345) == "UNKNOWN"


def test_parse_error_carries_status_name_and_message():
    with pytest.raises(humming.InvalidArgumentError) as info:
        humming.Format("w=int4 a=f16 bogus")
    e = info.value
    assert e.status == raw.HM_ERROR_PARSE
    assert e.name == "ERROR_PARSE"
    assert e.category == raw.HM_ERROR_INVALID_ARGUMENT
    assert "hm_format_parse" in e.message and "bogus" in e.message
    assert str(e).startswith("ERROR_PARSE (1003): ")
    assert isinstance(e, ValueError)  # callers catching ValueError keep working


def test_categories_map_to_subclasses():
    assert isinstance(humming._errors.error_for(raw.HM_ERROR_UNSUPPORTED_ARCH, "x"),
                      humming.UnsupportedError)
    assert isinstance(humming._errors.error_for(raw.HM_ERROR_CUDA, "x"), humming.DriverError)
    assert isinstance(humming._errors.error_for(raw.HM_ERROR_COMPILE, "x"), humming.CompileError)
    io = humming._errors.error_for(raw.HM_ERROR_CACHE_CORRUPT, "bad entry")
    assert isinstance(io, humming.CacheError) and isinstance(io, OSError)
    assert str(io) == "ERROR_CACHE_CORRUPT (5001): bad entry"
    assert isinstance(humming._errors.error_for(raw.HM_ERROR_DEVICE_OUT_OF_MEMORY, "x"),
                      MemoryError)
    assert isinstance(humming._errors.error_for(raw.HM_ERROR_INTERNAL, "x"), humming.InternalError)


def test_last_error_is_per_thread_and_clearable():
    humming.clear_last_error()
    with pytest.raises(humming.Error):
        humming.DType("not-a-dtype")
    assert "not-a-dtype" in humming.last_error_message()
    seen = []
    t = threading.Thread(target=lambda: seen.append(humming.last_error_message()))
    t.start()
    t.join()
    assert seen == [""]  # another thread has its own (empty) message
    humming.clear_last_error()
    assert humming.last_error_message() == ""


def test_errors_from_many_threads_keep_their_own_messages():
    # Each thread fails with its own bad text; with the GIL released around the C calls, the
    # message read after each failure must still be that thread's own.
    failures = []

    def worker(i):
        for _ in range(200):
            try:
                humming.Format(f"w=int4 thread{i}=1")
            except humming.Error as e:
                if f"thread{i}" not in e.message:
                    failures.append(e.message)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_long_messages_are_read_whole():
    # User text is quoted to a bounded length (issue 16), but this message, with the list of
    # accepted dtypes, is still far longer than the first 256-byte read: it must arrive whole.
    text = "w=" + "x" * 2000
    with pytest.raises(humming.Error) as info:
        humming.Format(text)
    message = info.value.message
    assert len(message) > 512
    assert message.endswith("(the syntax is in docs/format.md)")
