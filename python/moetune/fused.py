"""fused_experts: vLLM's fused-MoE call on libmoetune, with the caches an
engine needs so that the steady state does no creation and no allocation.

Per call: the tensors are checked in Python (dtype, device, contiguity,
shape, alignment) and the problem by mt_problem_validate, all before any GPU
work; then the device's Context (module cache), the ModularKernel of the
problem (module cache keyed by device and problem, max M rounded up to a
power of two) and a workspace (torch uint8, cached per device, stream and
size) are fetched, and mt_modular_kernel_run enqueues on the current CUDA
stream. Cached kernels and workspaces live until clear_caches(): a captured
CUDA graph keeps pointing at them.

May call: core, quant, tensors, errors; torch when the tensors are torch's.
Called by: user code.
"""
import atexit
import os
import re
import sys
import threading

from . import _lib, core
from ._lib import Activation, ActFormat, DType, QuantMode
from .errors import DeviceCheckError, DtypeError, InvalidArgumentError, ShapeError
from .quant import QuantConfig, as_quant_config
from .tensors import (TORCH_NAMES, check_dtype, check_numel, check_placement, check_shape, info)

_lock = threading.RLock()
_contexts = {}      # device -> Context
_kernels = {}       # (device, pf kind, experts kind, problem key) -> [ModularKernel]
_workspaces = {}    # (device, stream, nbytes) -> tensor
_config = {"system_db": "auto", "user_db": None, "log": None, "log_level": "info",
           "no_defaults": False}

SYSTEM_DB_ENV = "MOETUNE_SYSTEM_DB"
USER_DB_ENV = "MOETUNE_USER_DB"


def configure(system_db="auto", user_db=None, log=None, log_level="info", no_defaults=False):
    """Settings of the contexts fused_experts opens (call before the first
    call, or clear_caches() after). system_db "auto": $MOETUNE_SYSTEM_DB, else
    the shipped database of this GPU's SKU if one is found (shipped_database);
    None: no system database. user_db None: $MOETUNE_USER_DB if set."""
    with _lock:
        _config.update(system_db=system_db, user_db=user_db, log=log, log_level=log_level,
                       no_defaults=no_defaults)


def shipped_database(device_name):
    """Path of the tuned database shipped for a GPU SKU ("NVIDIA H200" ->
    nvidia-h200.db) in the repository's db/tuned/ or an install's
    share/moetune/tuned/, or None."""
    slug = re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-") + ".db"
    dirs = [os.path.join(_lib.REPO_ROOT, "db", "tuned"),
            os.path.join(sys.prefix, "share", "moetune", "tuned"),
            "/usr/local/share/moetune/tuned", "/usr/share/moetune/tuned"]
    libp = _lib.loaded_path()
    if libp and os.path.sep in libp:
        dirs.insert(1, os.path.join(os.path.dirname(os.path.dirname(libp)), "share", "moetune",
                                    "tuned"))
    for d in dirs:
        p = os.path.join(d, slug)
        if os.path.isfile(p):
            return p
    return None


def get_context(device=0):
    """The cached Context of a device, opened with configure()'s settings."""
    with _lock:
        ctx = _contexts.get(device)
        if ctx is not None and not ctx.closed:
            return ctx   # (a closed one is opened again)
        c = dict(_config)
        user = c["user_db"] or os.environ.get(USER_DB_ENV) or None
        sysdb = c["system_db"]
        if sysdb == "auto":
            sysdb = os.environ.get(SYSTEM_DB_ENV) or None
            if sysdb is None:
                # The SKU decides the shipped database: ask the GPU first.
                probe = core.Context(device=device)
                sysdb = shipped_database(probe.device_name)
                probe.close()
        ctx = core.Context(device=device, system_db=sysdb, user_db=user, log=c["log"],
                           log_level=c["log_level"], no_defaults=c["no_defaults"])
        _contexts[device] = ctx
        return ctx


def clear_caches():
    """Destroy every cached kernel, workspace and context (graphs captured
    through fused_experts must not be replayed afterwards)."""
    with _lock:
        for lst in _kernels.values():
            for mk in lst:
                mk.close()
        _kernels.clear()
        _workspaces.clear()
        for ctx in _contexts.values():
            ctx.close()
        _contexts.clear()


atexit.register(clear_caches)


def cache_info():
    """Counts of the cached objects (for tests and introspection)."""
    with _lock:
        return {"contexts": len(_contexts),
                "kernels": sum(len(v) for v in _kernels.values()),
                "workspaces": len(_workspaces)}


def _next_pow2(m):
    p = 1
    while p < m:
        p <<= 1
    return p


def get_kernel(device, problem, prepare_finalize="standard", experts="moetune"):
    """The cached ModularKernel for problem (problem.M = the M it must take):
    an existing one with max M >= problem.M, else a new one with max M the
    next power of two (lookups are per power-of-two bucket, so the kernels
    chosen for an M do not depend on it)."""
    key = (device, str(prepare_finalize), str(experts), problem.key())
    with _lock:
        lst = _kernels.setdefault(key, [])
        for mk in lst:
            if mk.max_m >= problem.M:
                return mk
        ctx = get_context(device)
        p = core.Problem(**{**problem.__dict__, "M": min(_next_pow2(max(problem.M, 1)),
                                                          _lib.MAX_TOKENS)})
        pf = core.PrepareFinalize(prepare_finalize)
        ex = core.Experts(experts, pf.format)
        try:
            mk = core.ModularKernel(ctx, pf, ex, p)
        finally:
            pf.close()
            ex.close()
        lst.append(mk)
        lst.sort(key=lambda k: k.max_m)
        return mk


def _torch():
    return sys.modules.get("torch")


def get_workspace(mk, device, stream, like=None):
    """A cached device workspace of at least mk.workspace_size() bytes (torch
    uint8 on `device`), one per (device, stream, size): two streams never
    share one."""
    n = max(mk.workspace_size(), 256)
    key = (device, stream, n)
    ws = _workspaces.get(key)
    if ws is None:
        torch = _torch()
        if torch is None:
            raise InvalidArgumentError("no workspace given and torch is not imported: pass "
                                       "workspace= (a device buffer of %d bytes)" % n)
        ws = torch.empty(n, dtype=torch.uint8, device="cuda:%d" % device)
        with _lock:
            _workspaces[key] = ws
    return ws


def _current_stream(device, hidden):
    torch = _torch()
    if torch is not None and isinstance(hidden, torch.Tensor):
        return torch.cuda.current_stream(device).cuda_stream
    return 0


def _device_of(hi):
    typ, idx = hi.device
    if typ != "cuda":
        check_placement(hi, 0)   # raises DeviceMismatchError for the CPU
    if idx is None:
        torch = _torch()
        idx = torch.cuda.current_device() if torch is not None else 0
    return idx


def _check_scale(name, t, shape, device, what):
    if t is None:
        raise InvalidArgumentError("%s is required by quant mode %s" % (name, what))
    ti = info(name, t)
    check_dtype(ti, DType.FP32)
    check_numel(ti, shape, " (quant %s)" % what)
    check_placement(ti, device)
    return ti


def _cdiv(a, b):
    return -(-a // b)


def prepare_call(hidden, w1, w2, topk_weights, topk_ids, *, activation="silu", quant=None,
                 expert_map=None, global_num_experts=-1, apply_router_weight_on_input=False,
                 out=None, w1_scale=None, w2_scale=None, w1_zp=None, w2_zp=None,
                 a1_scale=None, a2_scale=None):
    """Check the arguments of fused_experts and describe the call.

    Returns (device, Problem with M = the tokens of this call, pointer dict);
    `out` in the dict may be None (fused_experts allocates it). Raises
    DtypeError, ShapeError, DeviceMismatchError, LayoutError, AlignmentError,
    InvalidArgumentError or the validation error of the C library. No GPU."""
    q = as_quant_config(quant)
    hi = info("hidden", hidden)
    device = _device_of(hi)
    check_dtype(hi, DType.BF16, DType.FP16)
    if len(hi.shape) != 2:
        raise ShapeError("hidden has shape %s; expected [M, K]" % list(hi.shape))
    M, K = hi.shape
    tensors = [hi]

    w1i, w2i = info("w1", w1), info("w2", w2)
    if len(w1i.shape) != 3 or len(w2i.shape) != 3:
        raise ShapeError("w1 %s and w2 %s must be 3-D: [E, 2N, K] and [E, K, N]"
                         % (list(w1i.shape), list(w2i.shape)))
    local_E, two_n = w1i.shape[0], w1i.shape[1]
    if two_n % 2:
        raise ShapeError("w1 has %d rows per expert; expected 2N (gate and up)" % two_n)
    N = two_n // 2
    pack = 2 if q.mode == QuantMode.W4A16 else 1
    c_q = q.to_c()
    want_w = DType(_lib.lib().mt_quant_weight_dtype(c_q, int(hi.dtype)))
    if w1i.dtype != want_w or w2i.dtype != want_w:
        bad = w1i if w1i.dtype != want_w else w2i
        hint = ""
        if q.mode == QuantMode.NONE and bad.dtype in (DType.FP8_E4M3, DType.INT8, DType.UINT8):
            hint = " (quantized weights: pass quant=QuantConfig.fp8_block() or the matching mode)"
        raise DtypeError("%s has dtype %s; quant %s with %s activations needs %s weights%s"
                         % (bad.name, bad.dtype_label, q, hi.dtype_label, TORCH_NAMES[want_w],
                            hint))
    check_shape(w1i, (local_E, 2 * N, K // pack), " ([E, 2N, K%s] for hidden [M, K=%d])"
                % ("/2" if pack == 2 else "", K))
    check_shape(w2i, (local_E, K, N // pack), " ([E, K, N%s] with N=%d from w1)"
                % ("/2" if pack == 2 else "", N))
    tensors += [w1i, w2i]

    ti = info("topk_ids", topk_ids)
    check_dtype(ti, DType.INT32, hint=" (vLLM's router returns int64 on some paths: pass "
                "topk_ids.int())" if ti.dtype == DType.INT64 else "")
    if len(ti.shape) != 2 or ti.shape[0] != M:
        raise ShapeError("topk_ids has shape %s; expected [M=%d, topk]" % (list(ti.shape), M))
    topk = ti.shape[1]
    tw = info("topk_weights", topk_weights)
    check_dtype(tw, DType.FP32, hint=" (pass topk_weights.float())")
    check_shape(tw, (M, topk), " (the shape of topk_ids)")
    tensors += [ti, tw]

    E = local_E
    em = None
    if global_num_experts is not None:
        global_num_experts = core._int(global_num_experts, "global_num_experts")
    if expert_map is not None:
        em = info("expert_map", expert_map)
        check_dtype(em, DType.INT32, hint=" (pass expert_map.int())")
        if len(em.shape) != 1:
            raise ShapeError("expert_map has shape %s; expected [E_global]" % list(em.shape))
        E = em.shape[0]
        if global_num_experts not in (-1, None) and global_num_experts != E:
            raise ShapeError("global_num_experts=%d but expert_map has %d entries"
                             % (global_num_experts, E))
        tensors.append(em)
    elif global_num_experts not in (-1, None) and global_num_experts != local_E:
        raise ShapeError("global_num_experts=%d differs from w1's %d experts but no "
                         "expert_map was given" % (global_num_experts, local_E))

    ptrs = {}
    gran = q.granularity
    scales = {}
    if gran != "none":
        if gran == "tensor":
            s1, s2 = (local_E,), (local_E,)
        elif gran == "token":
            s1, s2 = (local_E, 2 * N), (local_E, K)
        elif gran == "block":
            B = _lib.QUANT_BLOCK
            s1 = (local_E, _cdiv(2 * N, B), _cdiv(K, B))
            s2 = (local_E, _cdiv(K, B), _cdiv(N, B))
        else:
            g = q.group_size or 1
            s1, s2 = (local_E, 2 * N, K // g), (local_E, K, N // g)
        scales["w1_scale"] = _check_scale("w1_scale", w1_scale, s1, device, q)
        scales["w2_scale"] = _check_scale("w2_scale", w2_scale, s2, device, q)
        if q.is_weight_only and q.has_zero_point:
            for name, t, s in (("w1_zero", w1_zp, s1), ("w2_zero", w2_zp, s2)):
                if t is None:
                    raise InvalidArgumentError("%s is required: quant %s has zero points"
                                               % (name.replace("zero", "zp"), q))
                zi = info(name.replace("zero", "zp"), t)
                check_dtype(zi, DType.UINT8)
                check_numel(zi, s)
                scales[name] = zi
        if gran == "tensor" and (a1_scale is not None or a2_scale is not None):
            if a1_scale is None or a2_scale is None:
                raise InvalidArgumentError("static activation scales: pass both a1_scale and "
                                           "a2_scale (or neither for dynamic scales)")
            q = q.with_static_act_scale(True)
            scales["a1_scale"] = _check_scale("a1_scale", a1_scale, (1,), device, q)
            scales["a2_scale"] = _check_scale("a2_scale", a2_scale, (1,), device, q)
        elif a1_scale is not None or a2_scale is not None:
            raise InvalidArgumentError("a1_scale/a2_scale are static per-tensor scales; quant "
                                       "%s computes activation scales itself" % q)
    for name, t in (("w1_scale", w1_scale), ("w2_scale", w2_scale), ("w1_zp", w1_zp),
                    ("w2_zp", w2_zp)):
        if t is not None and name.replace("zp", "zero") not in scales:
            raise InvalidArgumentError("%s was given but quant %s does not use it" % (name, q))
    tensors += list(scales.values())

    oi = None
    if out is not None:
        oi = info("out", out)
        check_dtype(oi, hi.dtype, hint=" (the dtype of hidden)")
        check_shape(oi, (M, K), " (the shape of hidden)")
        tensors.append(oi)
    for t in tensors:
        check_placement(t, device)

    problem = core.Problem(M=M, E=E, topk=topk, K=K, N=N, dtype=hi.dtype, quant=q,
                           activation=_activation(activation),
                           has_expert_map=em is not None, local_E=local_E,
                           apply_router_weight_on_input=bool(apply_router_weight_on_input))
    problem.validate()
    ptrs.update(hidden=hi.ptr, w1=w1i.ptr, w2=w2i.ptr, topk_ids=ti.ptr, topk_weights=tw.ptr,
                expert_map=em.ptr if em is not None else None,
                out=oi.ptr if oi is not None else None)
    for name, s in scales.items():
        ptrs[name] = s.ptr
    return device, problem, ptrs


def _max_m(max_m, M):
    """The M a call's cached kernel is made for: max_m (an integer from M to
    MAX_TOKENS; beyond it every call once made another kernel), or M."""
    if max_m is None:
        return M
    try:
        return core._int(max_m, "max_m", M, _lib.MAX_TOKENS)
    except InvalidArgumentError as e:
        raise ShapeError("%s (M=%d, and at most %d tokens)" % (e, M, _lib.MAX_TOKENS)) from None


def _activation(a):
    if isinstance(a, str):
        a = a.lower()
        if a in ("silu", "swiglu"):
            return Activation.SILU
        if a in ("gelu", "gelu_erf", "geglu"):
            return Activation.GELU
        raise InvalidArgumentError("activation %r: moetune has silu and gelu" % a)
    try:
        return Activation(int(a))
    except (ValueError, TypeError):
        raise InvalidArgumentError("activation %r: moetune has silu and gelu" % (a,)) from None


def fused_experts(hidden, w1, w2, topk_weights, topk_ids, *, activation="silu", quant=None,
                  expert_map=None, global_num_experts=-1, apply_router_weight_on_input=False,
                  out=None, inplace=False, w1_scale=None, w2_scale=None, w1_zp=None,
                  w2_zp=None, a1_scale=None, a2_scale=None, max_m=None, stream=None,
                  workspace=None, prepare_finalize="standard", experts="moetune",
                  check_errors=False):
    """The fused MoE of vLLM's fused_experts on moetune's kernels; returns out.

    hidden [M, K] bf16/fp16; w1 [E, 2N, K], w2 [E, K, N] (quantized layouts:
    problem.h; w4a16 packs two per byte); topk_weights [M, topk] fp32;
    topk_ids [M, topk] int32; expert_map [E_global] int32 or None. quant: a
    QuantConfig (or a mode name), scales as problem.h lays them out.
    out: [M, K] (allocated like hidden when None; inplace=True writes hidden).
    max_m: the largest M this problem will be called with (sizes the cached
    kernel once; default: M rounded up to a power of two, growing as needed).
    stream: defaults to torch.cuda.current_stream(). check_errors: synchronize
    and raise DeviceCheckError if a topk id was out of range or an expert_map
    entry outside [-1, local_E) (slow; tests).
    """
    device, problem, ptrs = prepare_call(
        hidden, w1, w2, topk_weights, topk_ids, activation=activation, quant=quant,
        expert_map=expert_map, global_num_experts=global_num_experts,
        apply_router_weight_on_input=apply_router_weight_on_input,
        out=hidden if (inplace and out is None) else out, w1_scale=w1_scale,
        w2_scale=w2_scale, w1_zp=w1_zp, w2_zp=w2_zp, a1_scale=a1_scale, a2_scale=a2_scale)
    M = problem.M
    if out is None:
        if inplace:
            out = hidden
        else:
            out = hidden.new_empty((M, problem.K)) if hasattr(hidden, "new_empty") else None
            if out is None:
                raise InvalidArgumentError("pass out= (hidden has no new_empty())")
        ptrs["out"] = int(out.data_ptr())
    if M == 0:
        return out
    problem.M = _max_m(max_m, M)
    mk = get_kernel(device, problem, prepare_finalize, experts)
    s = core.stream_handle(stream) if stream is not None else _current_stream(device, hidden)
    if workspace is not None:   # the caller's: checked like every other tensor
        check_placement(info("workspace", workspace), device)
    ws = workspace if workspace is not None else get_workspace(mk, device, s)
    mk.run(M, ptrs, ws, stream=s)
    if check_errors:
        torch = _torch()
        if torch is not None:
            torch.cuda.synchronize(device)
        mk.read_error(M, ws)
    return out


def lookup(hidden, w1, w2, topk_weights, topk_ids, **kw):
    """LookupInfo of the kernels a fused_experts call with these arguments
    uses (creates the cached kernel if needed; nothing is launched)."""
    kw.pop("out", None)
    max_m = kw.pop("max_m", None)
    pf = kw.pop("prepare_finalize", "standard")
    ex = kw.pop("experts", "moetune")
    for k in ("inplace", "stream", "workspace", "check_errors"):
        kw.pop(k, None)
    device, problem, _ = prepare_call(hidden, w1, w2, topk_weights, topk_ids, **kw)
    M = problem.M
    problem.M = _max_m(max_m, max(M, 1))
    return get_kernel(device, problem, pf, ex).lookup(max(M, 1))


__all__ = ["fused_experts", "lookup", "configure", "get_context", "get_kernel",
           "get_workspace", "clear_caches", "cache_info", "shipped_database", "prepare_call",
           "DeviceCheckError", "QuantConfig", "ActFormat"]
