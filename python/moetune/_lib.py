"""Loading libmoetune and the ctypes mirror of its public C headers.

Mirrors include/moetune/status.h, problem.h and moetune.h: enum values,
structs (field order and C types exactly as the headers declare them) and
the prototypes of every function the package calls. Nothing here touches a
GPU; the library is loaded on first use (lib()), so `import moetune` works
on a machine without it.

May call: ctypes, the C library. Called by: every other module.
"""
import ctypes
import ctypes.util
import enum
import glob
import os
import re
import threading

from .errors import MoetuneLibraryNotFound

# ---------------------------------------------------------------------------
# Enums (values are the C enums' implicit values, in declaration order)
# ---------------------------------------------------------------------------


class Status(enum.IntEnum):
    OK = 0
    INVALID_ARG = 1
    SHAPE = 2
    DTYPE = 3
    ALIGNMENT = 4
    UNSUPPORTED = 5
    INCOMPATIBLE = 6
    NO_MEMORY = 7
    NO_DRIVER = 8
    NO_DEVICE = 9
    CUDA = 10
    KERNEL_FAULT = 11
    TIMEOUT = 12
    NVRTC = 13
    CUBLAS = 14
    TEMPLATE = 15
    DB = 16
    IO = 17
    NOT_FOUND = 18
    MISMATCH = 19
    DEVICE_CHECK = 20
    INTERNAL = 21


STATUS_COUNT = 22


class DType(enum.IntEnum):
    BF16 = 0
    FP16 = 1
    FP32 = 2
    FP8_E4M3 = 3
    INT8 = 4
    UINT8 = 5
    INT32 = 6
    INT64 = 7


class QuantMode(enum.IntEnum):
    NONE = 0
    FP8_PER_TENSOR = 1
    FP8_PER_TOKEN = 2
    FP8_BLOCK = 3
    INT8_PER_TENSOR = 4
    INT8_PER_TOKEN = 5
    INT8_BLOCK = 6
    W8A16 = 7
    W4A16 = 8


class ActFormat(enum.IntEnum):
    STANDARD = 0
    BATCHED = 1


class Activation(enum.IntEnum):
    SILU = 0
    GELU = 1


class LogLevel(enum.IntEnum):
    DEBUG = 0
    INFO = 1
    WARN = 2


class PFKind(enum.IntEnum):
    STANDARD = 0
    BATCHED = 1


class ExpertsKind(enum.IntEnum):
    MOETUNE = 0
    CUBLAS = 1


class LookupSource(enum.IntEnum):
    TUNED = 0
    SAME_CC = 1
    DEFAULTS = 2
    LIBRARY = 3


QUANT_BLOCK = 128          # MT_QUANT_BLOCK
MAX_EXPERTS = 1024         # MT_MAX_EXPERTS
MAX_DIM = 65536            # MT_MAX_DIM
MAX_TOKENS = 1 << 20       # MT_MAX_TOKENS

# C enums are `int`-sized on every ABI this project targets.
c_enum = ctypes.c_int

# ---------------------------------------------------------------------------
# Structs
# ---------------------------------------------------------------------------


class mt_quant_config(ctypes.Structure):
    _fields_ = [
        ("mode", c_enum),
        ("group_size", ctypes.c_int),
        ("has_zero_point", ctypes.c_int),
        ("static_act_scale", ctypes.c_int),
    ]


class mt_problem(ctypes.Structure):
    _fields_ = [
        ("M", ctypes.c_int64),
        ("E", ctypes.c_int64),
        ("topk", ctypes.c_int64),
        ("K", ctypes.c_int64),
        ("N", ctypes.c_int64),
        ("dtype", c_enum),
        ("topk_ids_dtype", c_enum),
        ("quant", mt_quant_config),
        ("format", c_enum),
        ("activation", c_enum),
        ("has_expert_map", ctypes.c_int),
        ("local_E", ctypes.c_int64),
        ("apply_router_weight_on_input", ctypes.c_int),
        ("max_tokens", ctypes.c_int64),
    ]


class mt_moe_tensors(ctypes.Structure):
    _fields_ = [
        ("hidden", ctypes.c_void_p),
        ("w1", ctypes.c_void_p),
        ("w2", ctypes.c_void_p),
        ("topk_ids", ctypes.c_void_p),
        ("topk_weights", ctypes.c_void_p),
        ("expert_map", ctypes.c_void_p),
        ("expert_num_tokens", ctypes.c_void_p),
        ("w1_scale", ctypes.c_void_p),
        ("w2_scale", ctypes.c_void_p),
        ("w1_zero", ctypes.c_void_p),
        ("w2_zero", ctypes.c_void_p),
        ("a1_scale", ctypes.c_void_p),
        ("a2_scale", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
    ]


LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, c_enum, ctypes.c_char_p)


class mt_context_config(ctypes.Structure):
    _fields_ = [
        ("device", ctypes.c_int),
        ("system_db", ctypes.c_char_p),
        ("user_db", ctypes.c_char_p),
        ("log", LOG_FN),
        ("log_user", ctypes.c_void_p),
        ("log_level", c_enum),
        ("no_defaults", ctypes.c_int),
    ]


class mt_lookup_info(ctypes.Structure):
    _fields_ = [
        ("source", c_enum),
        ("bucket_m", ctypes.c_int64),
        ("tuned_m", ctypes.c_int64),
        ("exact", ctypes.c_int),
        ("db_path", ctypes.c_char * 512),
        ("sku", ctypes.c_char * 64),
        ("pipeline", ctypes.c_char * 1024),
        ("provenance_diff", ctypes.c_char * 256),
    ]


# Every mirrored struct, by its C name (the size test walks this).
STRUCTS = {
    "mt_quant_config": mt_quant_config,
    "mt_problem": mt_problem,
    "mt_moe_tensors": mt_moe_tensors,
    "mt_context_config": mt_context_config,
    "mt_lookup_info": mt_lookup_info,
}

# ---------------------------------------------------------------------------
# Prototypes: name -> (restype, argtypes)
# ---------------------------------------------------------------------------

_p = ctypes.c_void_p
_cs = ctypes.c_char_p
_sz = ctypes.c_size_t
_i64 = ctypes.c_int64
_int = ctypes.c_int
_st = c_enum

PROTOTYPES = {
    "mt_version": (_cs, []),
    "mt_template_hash": (_cs, []),
    "mt_status_str": (_cs, [_st]),
    "mt_dtype_name": (_cs, [c_enum]),
    "mt_dtype_size": (_sz, [c_enum]),
    "mt_quant_mode_name": (_cs, [c_enum]),
    "mt_act_format_name": (_cs, [c_enum]),
    "mt_activation_name": (_cs, [c_enum]),
    "mt_lookup_source_name": (_cs, [c_enum]),
    "mt_quant_mode_parse": (_st, [_cs, ctypes.POINTER(c_enum)]),
    "mt_quant_weight_dtype": (c_enum, [ctypes.POINTER(mt_quant_config), c_enum]),
    "mt_quant_is_w8a8": (_int, [c_enum]),
    "mt_quant_is_weight_only": (_int, [c_enum]),
    "mt_problem_init": (None, [ctypes.POINTER(mt_problem), _i64, _i64, _i64, _i64, _i64]),
    "mt_problem_validate": (_st, [ctypes.POINTER(mt_problem), _cs, _sz]),
    "mt_context_config_init": (None, [ctypes.POINTER(mt_context_config)]),
    "mt_context_create": (_st, [ctypes.POINTER(mt_context_config), ctypes.POINTER(_p)]),
    "mt_context_destroy": (None, [_p]),
    "mt_context_errmsg": (_cs, [_p]),
    "mt_context_device_name": (_cs, [_p]),
    "mt_context_arch": (_cs, [_p]),
    "mt_prepare_finalize_create": (_st, [c_enum, ctypes.POINTER(_p)]),
    "mt_prepare_finalize_destroy": (None, [_p]),
    "mt_prepare_finalize_name": (_cs, [_p]),
    "mt_prepare_finalize_format": (c_enum, [_p]),
    "mt_prepare_finalize_accepts": (_int, [_p, c_enum]),
    "mt_experts_create": (_st, [c_enum, c_enum, ctypes.POINTER(_p)]),
    "mt_experts_destroy": (None, [_p]),
    "mt_experts_name": (_cs, [_p]),
    "mt_experts_format": (c_enum, [_p]),
    "mt_experts_accepts": (_int, [_p, c_enum]),
    "mt_compose_check": (_st, [_p, _p, ctypes.POINTER(mt_problem), _cs, _sz]),
    "mt_modular_kernel_create": (_st, [_p, _p, _p, ctypes.POINTER(mt_problem),
                                       ctypes.POINTER(_p)]),
    "mt_modular_kernel_destroy": (None, [_p]),
    "mt_modular_kernel_errmsg": (_cs, [_p]),
    "mt_modular_kernel_workspace_size": (_sz, [_p]),
    "mt_modular_kernel_max_m": (_i64, [_p]),
    "mt_modular_kernel_run": (_st, [_p, _i64, ctypes.POINTER(mt_moe_tensors), _p, _sz, _p]),
    "mt_modular_kernel_read_error": (_st, [_p, _i64, _p]),
    "mt_modular_kernel_lookup": (_st, [_p, _i64, ctypes.POINTER(mt_lookup_info)]),
}

# ---------------------------------------------------------------------------
# Finding and loading the library
# ---------------------------------------------------------------------------

LIBRARY_ENV = "MOETUNE_LIBRARY"
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
# The repository this package sits in when used from a checkout
# (PYTHONPATH=python or an editable install): python/moetune -> repo root.
REPO_ROOT = os.path.dirname(os.path.dirname(_PKG_DIR))


def candidate_paths():
    """The places searched for libmoetune, in order, as (label, path or None).

    1. $MOETUNE_LIBRARY (a file; an error if set but missing);
    2. libmoetune.so next to the package (an install that shipped it);
    3. the build folders of the repository the package came from
       (<repo>/build*/libmoetune.so, newest first, then <repo>/.gpu/bin);
    4. ctypes.util.find_library("moetune") (the system's search path).
    """
    out = []
    env = os.environ.get(LIBRARY_ENV)
    if env:
        out.append(("$" + LIBRARY_ENV, env))
        return out  # an explicit choice is never second-guessed
    out.append(("package", os.path.join(_PKG_DIR, "libmoetune.so")))
    builds = glob.glob(os.path.join(REPO_ROOT, "build*", "libmoetune.so"))
    builds.sort(key=lambda p: os.path.getmtime(p), reverse=True)
    for b in builds:
        if not _sanitized(b):
            out.append(("repository build", b))
    out.append(("repository .gpu", os.path.join(REPO_ROOT, ".gpu", "bin", "libmoetune.so")))
    out.append(("find_library", ctypes.util.find_library("moetune")))
    return out


_lock = threading.Lock()
_lib = None
_lib_path = None


# Functions the package works without: mt_status_str lives in the common
# layer, which libmoetune 0.1.0 links only where the runtime uses it (the
# package then names statuses itself, see core.status_str).
OPTIONAL = {"mt_status_str"}


def _declare(cdll):
    for name, (res, args) in PROTOTYPES.items():
        try:
            fn = getattr(cdll, name)
        except AttributeError:
            if name in OPTIONAL:
                continue
            raise AttributeError("%s lacks %s: not a libmoetune, or an incompatible version"
                                 % (getattr(cdll, "_name", "the library"), name)) from None
        fn.restype = res
        fn.argtypes = args


def has(name):
    """Whether the loaded library exports `name`."""
    return hasattr(lib(), name)


_SANITIZER_DIR = re.compile(r"(asan|ubsan|tsan|msan|sanit|fuzz|valgrind)", re.I)


def _needs_sanitizer_runtime(path):
    """A sanitizer runtime among the library's needed libraries (in its
    first MiBs): the ASan runtime aborts the process when such a library is
    dlopen'ed into a Python that did not preload it."""
    try:
        with open(path, "rb") as f:
            head = f.read(4 << 20)
    except OSError:
        return False
    return any(s in head for s in (b"libasan.so", b"libubsan.so", b"libtsan.so"))


def _sanitized(path):
    """A build the search skips: a sanitizer runtime needed, or a folder
    named for a sanitizer, fuzzing or valgrind."""
    return (bool(_SANITIZER_DIR.search(os.path.basename(os.path.dirname(path))))
            or _needs_sanitizer_runtime(path))


def load(path=None):
    """Load libmoetune (once) and return the ctypes.CDLL.

    path: an explicit file, else the search of candidate_paths(). Raises
    MoetuneLibraryNotFound naming every place looked at and why each failed.
    """
    global _lib, _lib_path
    with _lock:
        if _lib is not None and path is None:
            return _lib
        tried = []
        cands = [("argument", path)] if path else candidate_paths()
        for label, p in cands:
            if not p:
                tried.append("%s: not found" % label)
                continue
            if label != "find_library" and not os.path.exists(p):
                tried.append("%s: %s does not exist" % (label, p))
                continue
            # A sanitizer's runtime aborts the process on load unless it was
            # preloaded: say so instead of dying.
            if (label != "find_library" and _needs_sanitizer_runtime(p)
                    and not any(s in os.environ.get("LD_PRELOAD", "")
                                for s in ("libasan", "libubsan", "libtsan"))):
                tried.append("%s: %s is built with a sanitizer (load it with LD_PRELOAD set "
                             "to that sanitizer's runtime, e.g. libasan.so)" % (label, p))
                continue
            try:
                cdll = ctypes.CDLL(p)
                _declare(cdll)
            except (OSError, AttributeError) as e:
                tried.append("%s: %s: %s" % (label, p, e))
                continue
            _lib, _lib_path = cdll, (p if os.path.sep not in p else os.path.abspath(p))
            return _lib
        raise MoetuneLibraryNotFound(
            "libmoetune could not be loaded; looked at:\n  " + "\n  ".join(tried) +
            "\nBuild it (cmake --build build --target moetune) or set %s to the "
            "libmoetune.so file." % LIBRARY_ENV, tried)


def lib():
    """The loaded library (loading it on first use)."""
    return _lib if _lib is not None else load()


def loaded_path():
    """Path the library was loaded from (None before the first load)."""
    return _lib_path


def _reset_for_tests():
    global _lib, _lib_path
    with _lock:
        _lib, _lib_path = None, None


def cstr(b):
    """C string (bytes or None) -> str."""
    return b.decode("utf-8", "replace") if b else ""
