"""The composable objects of libmoetune as Python classes.

Context (one GPU + databases + log), PrepareFinalize and Experts
(descriptions, no GPU), Problem (mt_problem), ModularKernel (the composed
kernel for one problem shape and a max M: workspace_size(), run(), lookup(),
read_error()), and compose_check() (no GPU). Each class owns its C handle
and destroys it in close() / when collected; a ModularKernel keeps its
Context alive (C requires kernels to go before their context): a closed
Context takes no new kernel, and its C object is freed once its last
kernel is closed.

May call: _lib, errors, quant, tensors. Called by: fused, user code.
"""
import ctypes
import dataclasses
import operator
import os
import threading
import weakref

from . import _lib
from ._lib import (Activation, ActFormat, DType, ExpertsKind, LogLevel, LookupSource, PFKind,
                   QuantMode, cstr, lib)
from .errors import InvalidArgumentError, error_from_status
from .quant import QuantConfig, as_quant_config

_MSG_SIZE = 1024


def version():
    """libmoetune's version string ("MAJOR.MINOR.PATCH")."""
    return cstr(lib().mt_version())


def template_hash():
    return cstr(lib().mt_template_hash())


def status_str(status):
    """Short name of a status: the C library's ("invalid argument") when it
    exports mt_status_str, else the enum's name ("INVALID_ARG")."""
    L = lib()
    if hasattr(L, "mt_status_str"):
        return cstr(L.mt_status_str(int(status)))
    try:
        return _lib.Status(int(status)).name
    except ValueError:
        return "unknown status %d" % int(status)


def _int(value, what, lo=-(1 << 63), hi=(1 << 63) - 1):
    """value as an int in [lo, hi] (ctypes would wrap anything outside
    silently: 2**64 + 16 would read 16)."""
    try:
        v = operator.index(value)   # ints and integer-like (numpy) only
    except TypeError:
        raise InvalidArgumentError("%s must be an integer, not %r" % (what, value)) from None
    if not lo <= v <= hi:
        raise InvalidArgumentError("%s=%d is outside [%d, %d]" % (what, v, lo, hi))
    return v


def _path(value, what):
    """A file path (str, bytes or os.PathLike) as str, or None."""
    if not value:
        return None
    try:
        return os.fsdecode(os.fspath(value))
    except TypeError:
        raise InvalidArgumentError("%s must be a path (str or os.PathLike), not %s"
                                   % (what, type(value).__name__)) from None


def _enum(value, enum_cls, what):
    """Accept an enum member, its int, or its name ("batched", "fp8-block")."""
    if isinstance(value, str):
        key = value.strip().upper().replace("-", "_")
        if key in enum_cls.__members__:
            return enum_cls[key]
        raise InvalidArgumentError("unknown %s %r (one of: %s)" % (
            what, value, ", ".join(m.lower() for m in enum_cls.__members__)))
    try:
        return enum_cls(int(value))
    except (ValueError, TypeError):
        raise InvalidArgumentError("unknown %s %r" % (what, value)) from None


def _raise(status, message):
    raise error_from_status(status, message)


# ---------------------------------------------------------------------------
# Problem
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class Problem:
    """One fused-MoE problem shape (mt_problem; problem.h documents it).

    M is the largest M a modular kernel built for it accepts. local_E None
    means E (no expert map)."""

    M: int
    E: int
    topk: int
    K: int
    N: int
    dtype: DType = DType.BF16
    quant: QuantConfig = dataclasses.field(default_factory=QuantConfig)
    format: ActFormat = ActFormat.STANDARD
    activation: Activation = Activation.SILU
    has_expert_map: bool = False
    local_E: int = None
    apply_router_weight_on_input: bool = False
    max_tokens: int = 0
    topk_ids_dtype: DType = DType.INT32

    def to_c(self):
        p = _lib.mt_problem()
        p.M, p.E, p.topk, p.K, p.N = (_int(self.M, "M"), _int(self.E, "E"),
                                      _int(self.topk, "topk"), _int(self.K, "K"),
                                      _int(self.N, "N"))
        p.dtype = int(_enum(self.dtype, DType, "dtype"))
        p.topk_ids_dtype = int(_enum(self.topk_ids_dtype, DType, "topk_ids_dtype"))
        p.quant = as_quant_config(self.quant).to_c()
        p.format = int(_enum(self.format, ActFormat, "format"))
        p.activation = int(_enum(self.activation, Activation, "activation"))
        p.has_expert_map = int(bool(self.has_expert_map))
        p.local_E = _int(self.E if self.local_E is None else self.local_E, "local_E")
        p.apply_router_weight_on_input = int(bool(self.apply_router_weight_on_input))
        p.max_tokens = _int(self.max_tokens, "max_tokens")
        return p

    def validate(self):
        """mt_problem_validate (no GPU): raise the status's exception."""
        buf = ctypes.create_string_buffer(_MSG_SIZE)
        p = self.to_c()
        st = lib().mt_problem_validate(ctypes.byref(p), buf, _MSG_SIZE)
        if st:
            _raise(st, cstr(buf.value))

    def key(self):
        """Everything but M: what a kernel cache is keyed by."""
        return tuple(as_quant_config(self.quant) if f == "quant" else getattr(self, f)
                     for f in _PROBLEM_KEY)


_PROBLEM_KEY = tuple(f.name for f in dataclasses.fields(Problem) if f.name != "M")


def _quiet_close(self):
    """__del__: close, silently (at interpreter exit the library may be gone)."""
    try:
        self.close()
    except Exception:
        pass


# ---------------------------------------------------------------------------
# Context
# ---------------------------------------------------------------------------


class Context:
    """One GPU (its primary context, shared with PyTorch) and the tuned
    databases. log: callable(level: LogLevel, message: str) or None; it is
    called while modular kernels are created, never during a run.

    Raises NoDriverError / NoDeviceError without a GPU, DatabaseError /
    MoetuneIOError for a database that cannot be opened."""

    def __init__(self, device=0, system_db=None, user_db=None, log=None, log_level="info",
                 no_defaults=False):
        L = lib()
        self._h = None
        self.device = _int(device, "device (a CUDA device ordinal)", 0, (1 << 31) - 1)
        self.system_db, self.user_db = _path(system_db, "system_db"), _path(user_db, "user_db")
        cfg = _lib.mt_context_config()
        L.mt_context_config_init(ctypes.byref(cfg))
        cfg.device = self.device
        self._strs = (os.fsencode(self.system_db) if self.system_db else None,
                      os.fsencode(self.user_db) if self.user_db else None)
        cfg.system_db, cfg.user_db = self._strs
        self._log = log
        self._log_cb = None
        if log is not None:
            if not callable(log):
                raise InvalidArgumentError("log must be a callable(level, message) or None")
            self._log_cb = _lib.LOG_FN(self._on_log)
            cfg.log = self._log_cb
            cfg.log_level = int(_enum(log_level, LogLevel, "log level"))
        cfg.no_defaults = int(bool(no_defaults))
        h = ctypes.c_void_p()
        st = L.mt_context_create(ctypes.byref(cfg), ctypes.byref(h))
        if st:
            msg = cstr(L.mt_context_errmsg(h)) if h.value else ""
            L.mt_context_destroy(h)
            _raise(st, msg or "mt_context_create failed (%s)" % status_str(st))
        self._h = h
        self._lock = threading.Lock()
        self._kernels = weakref.WeakSet()   # open ModularKernels on this context
        self._closed = False

    def _on_log(self, user, level, message):
        try:
            self._log(LogLevel(level), cstr(message))
        except Exception:  # a log callback must never unwind through C
            pass

    @property
    def closed(self):
        """close() was called (its kernels may still be running)."""
        return self._h is None or self._closed

    @property
    def handle(self):
        if self.closed:
            raise InvalidArgumentError("the context is closed")
        return self._h

    @property
    def device_name(self):
        return cstr(lib().mt_context_device_name(self.handle))

    @property
    def arch(self):
        return cstr(lib().mt_context_arch(self.handle))

    def errmsg(self):
        return cstr(lib().mt_context_errmsg(self.handle))

    def close(self):
        """No new kernel on this context from now on; its C object is freed
        once the last ModularKernel made on it is closed (they keep running
        until then: freeing it under them would leave them a dangling
        context)."""
        self._closed = True
        if getattr(self, "_h", None) is not None and not len(getattr(self, "_kernels", ())):
            if _lib._lib is not None:
                _lib._lib.mt_context_destroy(self._h)
            self._h = None

    def _kernel_closed(self, mk):
        self._kernels.discard(mk)
        if self._closed:
            self.close()

    __del__ = _quiet_close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        if self.closed:
            return "Context(closed)"
        return "Context(device=%d, %r, %s)" % (self.device, self.device_name, self.arch)


# ---------------------------------------------------------------------------
# Prepare/finalize and experts
# ---------------------------------------------------------------------------


class _Described:
    _prefix = ""

    def _fn(self, what):
        return getattr(lib(), self._prefix + what)

    _what = ""

    @property
    def handle(self):
        if self._h is None:
            raise InvalidArgumentError("the %s is closed" % self._what)
        return self._h

    @property
    def name(self):
        return cstr(self._fn("name")(self.handle))

    @property
    def format(self):
        return ActFormat(self._fn("format")(self.handle))

    def accepts(self, quant):
        """Whether this object takes quant mode `quant` (QuantConfig, mode or name)."""
        return bool(self._fn("accepts")(self.handle, int(as_quant_config(quant).mode)))

    def close(self):
        if getattr(self, "_h", None) is not None and _lib._lib is not None:
            self._fn("destroy")(self._h)
        self._h = None

    __del__ = _quiet_close

    def __repr__(self):
        if self._h is None:
            return "%s(closed)" % type(self).__name__
        return "%s(%r)" % (type(self).__name__, self.name)


class PrepareFinalize(_Described):
    """kind: "standard" (no expert parallelism) or "batched" (moe_dispatch
    into [local_E, max_tokens, K]). No GPU needed."""

    _prefix = "mt_prepare_finalize_"
    _what = "prepare/finalize"

    def __init__(self, kind="standard"):
        self._h = None
        self.kind = _enum(kind, PFKind, "prepare/finalize kind")
        h = ctypes.c_void_p()
        st = lib().mt_prepare_finalize_create(int(self.kind), ctypes.byref(h))
        if st:
            _raise(st, "cannot create prepare/finalize %s" % self.kind.name.lower())
        self._h = h


class Experts(_Described):
    """kind: "moetune" (generated kernels) or "cublas" (batched only);
    format: "standard" or "batched". No GPU needed."""

    _prefix = "mt_experts_"
    _what = "experts object"

    def __init__(self, kind="moetune", format="standard"):
        self._h = None
        self.kind = _enum(kind, ExpertsKind, "experts kind")
        fmt = _enum(format, ActFormat, "format")
        h = ctypes.c_void_p()
        st = lib().mt_experts_create(int(self.kind), int(fmt), ctypes.byref(h))
        if st:
            _raise(st, "cannot create %s experts in the %s format"
                   % (self.kind.name.lower(), fmt.name.lower()))
        self._h = h


def _check_types(*checks):
    """InvalidArgumentError naming the first (object, class, argument name)
    whose object is not of its class."""
    for obj, cls, what in checks:
        if not isinstance(obj, cls):
            raise InvalidArgumentError("%s must be a %s, not %s" % (what, cls.__name__,
                                                                    type(obj).__name__))


def compose_check(pf, experts, problem):
    """Can pf and experts serve problem? Raises IncompatibleError (naming both
    objects and the mismatch) or the problem's validation error. No GPU."""
    _check_types((pf, PrepareFinalize, "pf"), (experts, Experts, "experts"),
                 (problem, Problem, "problem"))
    buf = ctypes.create_string_buffer(_MSG_SIZE)
    p = problem.to_c()
    st = lib().mt_compose_check(pf.handle, experts.handle, ctypes.byref(p), buf, _MSG_SIZE)
    if st:
        _raise(st, cstr(buf.value))


# ---------------------------------------------------------------------------
# Modular kernel
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class LookupInfo:
    """Which kernels serve a call with M tokens and where they came from."""

    source: str            # "tuned", "same-cc", "defaults", "library"
    bucket_m: int          # the M the lookup was made for
    tuned_m: int           # M of the entry used (0 for defaults)
    exact: bool            # tuned_m == bucket_m
    db_path: str           # database that served it ("" otherwise)
    sku: str               # SKU of the entry ("" otherwise)
    pipeline: str          # the pipeline text (docs/DATABASE.md form)
    provenance_diff: str   # fields that differ from this machine ("" when none)


def _ptr(v):
    """A device pointer from an int, None, or a tensor-like (data_ptr())."""
    if v is None:
        return None
    if isinstance(v, int):
        return v or None
    if hasattr(v, "data_ptr"):
        return int(v.data_ptr()) or None
    raise InvalidArgumentError("expected a device pointer (int) or a tensor, not %s"
                               % type(v).__name__)


def _nbytes(v):
    """Bytes of a tensor-like (nbytes, or numel() x element_size()); None
    for an int pointer or None."""
    if v is None or isinstance(v, int):
        return None
    n = getattr(v, "nbytes", None)
    if isinstance(n, int):
        return n
    if hasattr(v, "numel") and hasattr(v, "element_size"):
        return int(v.numel()) * int(v.element_size())
    return None


def stream_handle(stream):
    """CUstream value of an int, None (0: the legacy default stream) or a
    torch.cuda.Stream-like object (its cuda_stream)."""
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    h = getattr(stream, "cuda_stream", None)
    if h is None:
        raise InvalidArgumentError("stream must be an int CUstream or have .cuda_stream")
    return int(h)


_TENSOR_FIELDS = [f for f, _ in _lib.mt_moe_tensors._fields_]


class ModularKernel:
    """prepare/finalize + experts composed for `problem` (problem.M = max M).

    Creation selects and loads every kernel (tuned lookup per M bucket,
    NVRTC for what has no loadable image), so run() never compiles or
    allocates. Raises IncompatibleError, NotFoundError, NvrtcError, ..."""

    def __init__(self, context, pf, experts, problem):
        self._h = None
        # C would take one object for the other (both are handles).
        _check_types((context, Context, "context"), (pf, PrepareFinalize, "pf"),
                     (experts, Experts, "experts"), (problem, Problem, "problem"))
        self.context = context   # keeps the context alive while this kernel is
        self.problem = problem
        p = problem.to_c()
        h = ctypes.c_void_p()
        L = lib()
        st = L.mt_modular_kernel_create(context.handle, pf.handle, experts.handle,
                                        ctypes.byref(p), ctypes.byref(h))
        if st:
            msg = cstr(L.mt_modular_kernel_errmsg(h)) if h.value else ""
            L.mt_modular_kernel_destroy(h)
            _raise(st, msg or "mt_modular_kernel_create failed (%s)" % status_str(st))
        self._h = h
        context._kernels.add(self)
        self._run = L.mt_modular_kernel_run
        self._ws_size = int(L.mt_modular_kernel_workspace_size(h))
        self._max_m = int(L.mt_modular_kernel_max_m(h))
        self.pf_name, self.experts_name = pf.name, experts.name

    @property
    def handle(self):
        if self._h is None:
            raise InvalidArgumentError("the modular kernel is closed")
        return self._h

    def workspace_size(self):
        """Bytes of device workspace a call needs (any M up to max_m)."""
        return self._ws_size

    @property
    def max_m(self):
        return self._max_m

    def errmsg(self):
        return cstr(lib().mt_modular_kernel_errmsg(self.handle))

    def run(self, M, tensors, workspace, workspace_size=None, stream=None):
        """Enqueue the fused MoE for M tokens on `stream`.

        tensors: an mt_moe_tensors, or a dict of its field names to device
        pointers / tensors (missing fields are NULL). workspace: a device
        pointer or a tensor of at least workspace_size() bytes (256-byte
        aligned). Raises the C status's exception with the kernel's message."""
        if isinstance(tensors, dict):
            unknown = set(tensors) - set(_TENSOR_FIELDS)
            if unknown:
                raise InvalidArgumentError("unknown tensor fields: %s" % ", ".join(sorted(unknown)))
            t = _lib.mt_moe_tensors(**{k: _ptr(v) for k, v in tensors.items()})
        elif isinstance(tensors, _lib.mt_moe_tensors):
            t = tensors
        else:
            raise InvalidArgumentError("tensors must be an mt_moe_tensors or a dict")
        if workspace_size is None:
            # A tensor says how large it is; C refuses one that is too small.
            nbytes = _nbytes(workspace)
            workspace_size = self._ws_size if nbytes is None else nbytes
        st = self._run(self.handle, _int(M, "M"), ctypes.byref(t), _ptr(workspace),
                       _int(workspace_size, "workspace_size", 0, (1 << 64) - 1),
                       stream_handle(stream))
        if st:
            _raise(st, self.errmsg())

    def read_error(self, M, workspace):
        """After the last call's stream completed: raise DeviceCheckError when a
        device-side check fired (a topk id out of range...). Synchronous."""
        st = lib().mt_modular_kernel_read_error(self.handle, _int(M, "M"), _ptr(workspace))
        if st:
            _raise(st, self.errmsg())

    def lookup(self, M):
        """LookupInfo of a call with M tokens (1 <= M <= max_m)."""
        li = _lib.mt_lookup_info()
        st = lib().mt_modular_kernel_lookup(self.handle, _int(M, "M"), ctypes.byref(li))
        if st:
            _raise(st, self.errmsg())
        return LookupInfo(source=cstr(lib().mt_lookup_source_name(li.source)),
                          bucket_m=int(li.bucket_m), tuned_m=int(li.tuned_m),
                          exact=bool(li.exact), db_path=cstr(li.db_path), sku=cstr(li.sku),
                          pipeline=cstr(li.pipeline), provenance_diff=cstr(li.provenance_diff))

    def close(self):
        if getattr(self, "_h", None) is not None and _lib._lib is not None:
            _lib._lib.mt_modular_kernel_destroy(self._h)
        self._h = None
        ctx = getattr(self, "context", None)
        if isinstance(ctx, Context):
            ctx._kernel_closed(self)

    __del__ = _quiet_close

    def __repr__(self):
        return "ModularKernel(%s + %s, max_m=%d, workspace=%d B)" % (
            self.pf_name, self.experts_name, self._max_m, self._ws_size)


__all__ = ["version", "template_hash", "status_str", "Problem", "Context", "PrepareFinalize",
           "Experts", "compose_check", "ModularKernel", "LookupInfo", "stream_handle",
           "LookupSource", "QuantMode"]
