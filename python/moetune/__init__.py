"""moetune: tuned fused-MoE kernels for inference engines, over libmoetune.

    import torch, moetune
    out = moetune.fused_experts(hidden, w1, w2, topk_weights, topk_ids.int())

A pure-Python ctypes binding (no compiled extension). The library is found
on first use: $MOETUNE_LIBRARY, next to this package, the build folders of
the repository it sits in, then the system's search path
(MoetuneLibraryNotFound names every place tried). docs/PYTHON.md is the
guide; include/moetune/moetune.h is the C contract it mirrors.
"""
from ._lib import (Activation, ActFormat, DType, ExpertsKind, LogLevel, LookupSource, PFKind,
                   QuantMode, Status, candidate_paths, load, loaded_path)
from .core import (Context, Experts, LookupInfo, ModularKernel, PrepareFinalize, Problem,
                   compose_check, status_str, template_hash, version)
from .errors import (AlignmentError, CublasError, CudaError, DatabaseError, DeviceCheckError,
                     DeviceMismatchError, DtypeError, IncompatibleError, InternalError,
                     InvalidArgumentError, KernelFaultError, LayoutError, MismatchError,
                     MoetuneError, MoetuneIOError, MoetuneLibraryNotFound, MoetuneTimeoutError,
                     NoDeviceError, NoDriverError, NotFoundError, NvrtcError, OutOfMemoryError,
                     ShapeError, TemplateError, UnsupportedError, error_from_status,
                     exception_class)
from .fused import (cache_info, clear_caches, configure, fused_experts, get_context,
                    get_kernel, lookup, shipped_database)
from .quant import QuantConfig

__version__ = "0.1.0"

__all__ = [
    "fused_experts", "lookup", "configure", "clear_caches", "cache_info", "get_context",
    "get_kernel", "shipped_database", "QuantConfig", "Context", "PrepareFinalize", "Experts",
    "ModularKernel", "Problem", "LookupInfo", "compose_check", "version", "template_hash",
    "status_str", "load", "loaded_path", "candidate_paths", "Status", "DType", "QuantMode",
    "ActFormat", "Activation", "LogLevel", "PFKind", "ExpertsKind", "LookupSource",
    "MoetuneError", "MoetuneLibraryNotFound", "InvalidArgumentError", "ShapeError",
    "DtypeError", "AlignmentError", "UnsupportedError", "IncompatibleError",
    "OutOfMemoryError", "NoDriverError", "NoDeviceError", "CudaError", "KernelFaultError",
    "MoetuneTimeoutError", "NvrtcError", "CublasError", "TemplateError", "DatabaseError",
    "MoetuneIOError", "NotFoundError", "MismatchError", "DeviceCheckError", "InternalError",
    "DeviceMismatchError", "LayoutError", "error_from_status", "exception_class",
]
