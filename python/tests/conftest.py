"""Shared pytest fixtures of the CPU tests: a tiny fake tensor (no torch
needed) and the library under test ($MOETUNE_LIBRARY or the package's own
search)."""
import itertools
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
# The repository the tests sit in (python/tests -> root).
REPO = os.path.dirname(os.path.dirname(HERE))
try:   # the installed package (scripts/test-python.sh), else the source tree
    import moetune
except ImportError:
    sys.path.insert(0, os.path.dirname(HERE))
    import moetune  # noqa: E402
# What a child process needs on PYTHONPATH to import the same package.
PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(moetune.__file__)))

_addr = itertools.count(1)


class FakeTensor:
    """Just what moetune reads from a tensor: data_ptr(), shape, dtype (a
    torch-style name), device ("cuda:0", "cpu"), is_contiguous(), new_empty().
    Each one gets a distinct 256-byte aligned fake address."""

    def __init__(self, shape, dtype="bfloat16", device="cuda:0", contiguous=True, offset=0):
        self.shape = tuple(shape)
        self.dtype = "torch." + dtype
        self.device = device
        self._contig = contiguous
        self._ptr = next(_addr) * (1 << 30) + offset

    def data_ptr(self):
        return self._ptr

    def is_contiguous(self):
        return self._contig

    def new_empty(self, shape):
        return FakeTensor(shape, self.dtype[len("torch."):], self.device)


def lib_available():
    try:
        moetune.load()
        return True
    except moetune.MoetuneLibraryNotFound:
        return False


def gpu_available():
    try:
        moetune.Context().close()
        return True
    except moetune.MoetuneError:
        return False


@pytest.fixture
def fake():
    return FakeTensor


needs_lib = pytest.mark.skipif(not lib_available(), reason="libmoetune not found "
                               "(set MOETUNE_LIBRARY)")
