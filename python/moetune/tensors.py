"""Reading tensors without depending on torch.

A "tensor" is anything with data_ptr(), shape, dtype, device and
is_contiguous() (a torch.Tensor, or the tests' fake). This module turns one
into a TensorInfo and holds the checks every call makes before C sees a
pointer: dtype, contiguity, device, shape and 16-byte alignment, raising
the package's exceptions with messages that say what to do.

May call: errors, _lib (the DType enum). Called by: fused, core.
"""
import dataclasses

from ._lib import DType
from .errors import (AlignmentError, DeviceMismatchError, DtypeError, InvalidArgumentError,
                     LayoutError, ShapeError)

_DTYPES = {
    "bfloat16": DType.BF16, "bf16": DType.BF16,
    "float16": DType.FP16, "half": DType.FP16, "fp16": DType.FP16,
    "float32": DType.FP32, "float": DType.FP32, "fp32": DType.FP32,
    "float8_e4m3fn": DType.FP8_E4M3, "fp8e4m3": DType.FP8_E4M3,
    "int8": DType.INT8, "uint8": DType.UINT8,
    "int32": DType.INT32, "int": DType.INT32,
    "int64": DType.INT64, "long": DType.INT64,
}

_SIZES = {DType.BF16: 2, DType.FP16: 2, DType.FP32: 4, DType.FP8_E4M3: 1,
          DType.INT8: 1, DType.UINT8: 1, DType.INT32: 4, DType.INT64: 8}

# torch dtype names per moetune dtype (for messages and allocation).
TORCH_NAMES = {DType.BF16: "bfloat16", DType.FP16: "float16", DType.FP32: "float32",
               DType.FP8_E4M3: "float8_e4m3fn", DType.INT8: "int8", DType.UINT8: "uint8",
               DType.INT32: "int32", DType.INT64: "int64"}


def dtype_of(obj):
    """moetune DType of a torch dtype / string, or None when it has none."""
    s = str(obj)
    if s.startswith("torch."):
        s = s[len("torch."):]
    return _DTYPES.get(s)


def dtype_label(obj):
    s = str(obj)
    return s[len("torch."):] if s.startswith("torch.") else s


def parse_device(dev):
    """(type, index) of a torch.device, a "cuda:1" string or an int ordinal.
    index is None when unspecified ("cuda")."""
    if isinstance(dev, int):
        return ("cuda", dev)
    typ = getattr(dev, "type", None)
    if typ is not None:
        return (str(typ), getattr(dev, "index", None))
    s = str(dev)
    if ":" in s:
        t, i = s.split(":", 1)
        if not i.isdigit():
            raise InvalidArgumentError("device %r: the index after ':' must be a number" % s)
        return (t, int(i))
    return (s, None)


@dataclasses.dataclass
class TensorInfo:
    name: str
    shape: tuple
    dtype: object          # DType or None
    dtype_label: str
    device: tuple          # (type, index)
    ptr: int
    contiguous: bool
    obj: object

    @property
    def numel(self):
        n = 1
        for d in self.shape:
            n *= int(d)
        return n

    @property
    def nbytes(self):
        return self.numel * _SIZES.get(self.dtype, 0)


def info(name, t):
    """TensorInfo of tensor-like t (InvalidArgumentError if it is not one)."""
    for attr in ("data_ptr", "shape", "dtype", "device"):
        if not hasattr(t, attr):
            raise InvalidArgumentError("%s must be a tensor (an object with data_ptr(), shape, "
                                       "dtype, device), not %s" % (name, type(t).__name__))
    contig = t.is_contiguous() if hasattr(t, "is_contiguous") else True
    return TensorInfo(name=name, shape=tuple(int(d) for d in t.shape), dtype=dtype_of(t.dtype),
                      dtype_label=dtype_label(t.dtype), device=parse_device(t.device),
                      ptr=int(t.data_ptr()), contiguous=bool(contig), obj=t)


def check_dtype(ti, *allowed, hint=""):
    if ti.dtype not in allowed:
        want = " or ".join(TORCH_NAMES[a] for a in allowed)
        raise DtypeError("%s has dtype %s; it must be %s%s" % (ti.name, ti.dtype_label, want,
                                                               hint))


def check_shape(ti, want, what=""):
    want = tuple(int(d) for d in want)
    if ti.shape != want:
        raise ShapeError("%s has shape %s; expected %s%s" % (ti.name, list(ti.shape),
                                                            list(want), what))


def check_numel(ti, want, what=""):
    """Scales may carry trailing size-1 dims (vLLM's [E, 2N, 1]): compare the
    element count and the leading dim."""
    want = tuple(int(d) for d in want)
    n = 1
    for d in want:
        n *= d
    if ti.numel != n or (ti.shape and ti.shape[0] != want[0]):
        raise ShapeError("%s has shape %s; expected %s%s" % (ti.name, list(ti.shape),
                                                            list(want), what))


def check_placement(ti, device):
    """Contiguous, on cuda device `device` (an int), 16-byte aligned."""
    typ, idx = ti.device
    if typ != "cuda":
        raise DeviceMismatchError("%s is on the %s; moetune needs CUDA tensors (call .cuda())"
                                  % (ti.name, typ))
    if idx is not None and idx != device:
        raise DeviceMismatchError("%s is on cuda:%d but the call runs on cuda:%d (the "
                                  "device of hidden)" % (ti.name, idx, device))
    if not ti.contiguous:
        raise LayoutError("%s is not contiguous (row-major, densely packed); call "
                          ".contiguous() first" % ti.name)
    if ti.numel and ti.ptr % 16:
        raise AlignmentError("%s's data pointer 0x%x is not 16-byte aligned (a sliced view? "
                             "copy it with .clone())" % (ti.name, ti.ptr))
