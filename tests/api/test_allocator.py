"""The allocator setting run-api applies: freed MB-sized buffers are reused, not faulted in again."""

from __future__ import annotations

import platform
import resource

import pytest

from atroposlib.api.allocator import keep_freed_memory


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="mallopt is a glibc interface",
)
def test_freed_large_buffers_are_reused_without_page_faults():
    assert keep_freed_memory() is True
    size = 8 << 20
    bytearray(size)  # first use: the heap grows (page faults expected)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        buf = bytearray(size)  # zero-filled: touches every page
        del buf
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert faults < (size // 4096) // 2, f"{faults} page faults for 5 reused 8 MB buffers"
