"""GPU checks of the Python package against a plain PyTorch reference.

fused_experts vs. an fp32 PyTorch MoE (rounding where the kernels round:
GEMM1 outputs, the activation, GEMM2 outputs, the sum) on random inputs,
hidden ~ N(0,1), weights ~ N(0,1)/sqrt(reduction dim), softmax top-k
routing, for two model shapes (Qwen3-30B-A3B, DeepSeek-V2-Lite) at several
M: bf16 (relative L2 < 1e-2) and fp8 block-wise (weights quantized per
128x128 block to e4m3 with fp32 scales, activations per token per 128 group
as include/moetune/numeric.h says; relative L2 < 3e-2). Then a capture
through torch.cuda.graph replayed against eager, in-place output, the
kernel cache (no creation on a second call), lookup introspection and the
device-side topk check.

Runs under pytest (skipped without torch.cuda) or as a plain script:
    PYTHONPATH=python MOETUNE_LIBRARY=.gpu/bin/libmoetune.so python3 python/tests/test_gpu.py
printing PASS/FAIL lines and "N passed, N failed"; exit code 0/1.
"""
import math
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

try:
    import torch
    HAVE_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover - CPU machines without torch
    torch = None
    HAVE_CUDA = False

import moetune  # noqa: E402
from moetune import QuantConfig  # noqa: E402

# name: (E, topk, K, N, renormalize top-k)
SHAPES = {
    "qwen3-30b-a3b": (128, 8, 2048, 768, True),
    "deepseek-v2-lite": (64, 6, 2048, 1408, False),
}
M_BF16 = (1, 7, 64, 300)
M_FP8 = (1, 33, 256)
TOL_BF16 = 1e-2
TOL_FP8 = 3e-2
E4M3_MAX = 448.0
BLOCK = 128

_weights = {}


def gen(seed):
    return torch.Generator(device="cuda").manual_seed(seed)


def model_weights(shape):
    """bf16 w1 [E, 2N, K], w2 [E, K, N], ~ N(0,1)/sqrt(reduction dim); cached."""
    if shape not in _weights:
        E, topk, K, N, _ = SHAPES[shape]
        g = gen(1234)
        w1 = (torch.randn(E, 2 * N, K, device="cuda", generator=g) / math.sqrt(K)).bfloat16()
        w2 = (torch.randn(E, K, N, device="cuda", generator=g) / math.sqrt(N)).bfloat16()
        _weights[shape] = (w1, w2)
    return _weights[shape]


def inputs(shape, M, seed):
    E, topk, K, N, renorm = SHAPES[shape]
    g = gen(seed)
    hidden = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    logits = torch.randn(M, E, device="cuda", generator=g)
    probs = torch.softmax(logits, dim=-1)
    tw, ti = torch.topk(probs, topk, dim=-1)
    if renorm:
        tw = tw / tw.sum(dim=-1, keepdim=True)
    return hidden, tw.float().contiguous(), ti.int().contiguous()


# ---------------------------------------------------------------------------
# fp8 block quantization, as problem.h and numeric.h define it
# ---------------------------------------------------------------------------


def e4m3(x):
    """fp32 -> e4m3 satfinite (round to nearest even) -> fp32."""
    return x.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).float()


def act_scale(amax):
    """s = amax / 448 as an fp32 division; 1 where amax == 0."""
    return torch.where(amax == 0, torch.ones_like(amax), amax / E4M3_MAX)


def quant_weight_block(w):
    """w [E, R, C] -> (e4m3 [E, R, C], fp32 scales [E, ceil(R/128), ceil(C/128)])."""
    E, R, C = w.shape
    rb, cb = -(-R // BLOCK), -(-C // BLOCK)
    wp = torch.zeros(E, rb * BLOCK, cb * BLOCK, device=w.device)
    wp[:, :R, :C] = w.float()
    blocks = wp.view(E, rb, BLOCK, cb, BLOCK)
    amax = blocks.abs().amax(dim=(2, 4))
    s = act_scale(amax)
    q = (blocks / s[:, :, None, :, None]).clamp(-E4M3_MAX, E4M3_MAX)
    q = q.view(E, rb * BLOCK, cb * BLOCK)[:, :R, :C].to(torch.float8_e4m3fn).contiguous()
    return q, s.contiguous()


def dequant_weight_block(q, s):
    E, R, C = q.shape
    full = s.repeat_interleave(BLOCK, 1).repeat_interleave(BLOCK, 2)[:, :R, :C]
    return q.float() * full


def quant_act_groups(x):
    """Per row, per group of 128 along the last dim: q(x / s) * s (fp32)."""
    rows, n = x.shape
    out = torch.empty_like(x)
    for k0 in range(0, n, BLOCK):
        seg = x[:, k0:k0 + BLOCK]
        s = act_scale(seg.abs().amax(dim=1, keepdim=True))
        out[:, k0:k0 + BLOCK] = e4m3(seg / s) * s
    return out


# ---------------------------------------------------------------------------
# The reference
# ---------------------------------------------------------------------------


def reference(hidden, w1, w2, tw, ti, fp8=False):
    """Plain PyTorch fused MoE (silu), fp32 math, rounded to the element dtype
    where the kernels store (h, a, y, out). w1/w2: element dtype, or
    dequantized fp32 when fp8 (activations are then quantized per group)."""
    dt = hidden.dtype
    M, K = hidden.shape
    N = w1.shape[1] // 2
    x = hidden.float()
    out = torch.zeros(M, K, device=hidden.device)
    for e in torch.unique(ti).tolist():
        tok, slot = (ti == e).nonzero(as_tuple=True)
        xe = x[tok]
        if fp8:
            xe = quant_act_groups(xe)
        h = (xe @ w1[e].float().t()).to(dt).float()
        a = (torch.nn.functional.silu(h[:, :N]) * h[:, N:]).to(dt).float()
        if fp8:
            a = quant_act_groups(a)
        y = (a @ w2[e].float().t()).to(dt).float()
        out.index_add_(0, tok, y * tw[tok, slot, None])
    return out.to(dt)


def rel_l2(a, b):
    a, b = a.float(), b.float()
    return (torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b)).item()


# ---------------------------------------------------------------------------
# Checks: each returns a detail string or raises AssertionError
# ---------------------------------------------------------------------------


def check_bf16(shape, M):
    w1, w2 = model_weights(shape)
    hidden, tw, ti = inputs(shape, M, seed=M)
    out = moetune.fused_experts(hidden, w1, w2, tw, ti, check_errors=True)
    torch.cuda.synchronize()
    ref = reference(hidden, w1, w2, tw, ti)
    err = rel_l2(out, ref)
    assert out.shape == hidden.shape and out.dtype == hidden.dtype
    assert torch.isfinite(out.float()).all(), "non-finite output"
    assert err < TOL_BF16, "relative L2 %.3e >= %.0e" % (err, TOL_BF16)
    info = moetune.lookup(hidden, w1, w2, tw, ti)
    return "rel_l2 %.2e, %s kernels (bucket M=%d, tuned M=%d)" % (
        err, info.source, info.bucket_m, info.tuned_m)


_fp8 = {}


def fp8_weights(shape):
    if shape not in _fp8:
        w1, w2 = model_weights(shape)
        q1, s1 = quant_weight_block(w1)
        q2, s2 = quant_weight_block(w2)
        _fp8[shape] = (q1, s1, q2, s2)
    return _fp8[shape]


def check_fp8_block(shape, M):
    E, topk, K, N, _ = SHAPES[shape]
    q1, s1, q2, s2 = fp8_weights(shape)
    assert s1.shape == (E, -(-2 * N // BLOCK), -(-K // BLOCK))
    assert s2.shape == (E, -(-K // BLOCK), -(-N // BLOCK))
    hidden, tw, ti = inputs(shape, M, seed=100 + M)
    out = moetune.fused_experts(hidden, q1, q2, tw, ti, quant=QuantConfig.fp8_block(),
                                w1_scale=s1, w2_scale=s2, check_errors=True)
    torch.cuda.synchronize()
    ref = reference(hidden, dequant_weight_block(q1, s1), dequant_weight_block(q2, s2), tw, ti,
                    fp8=True)
    err = rel_l2(out, ref)
    assert torch.isfinite(out.float()).all(), "non-finite output"
    assert err < TOL_FP8, "relative L2 %.3e >= %.0e" % (err, TOL_FP8)
    return "rel_l2 %.2e" % err


def check_cuda_graph():
    shape, M = "qwen3-30b-a3b", 48
    w1, w2 = model_weights(shape)
    hidden, tw, ti = inputs(shape, M, seed=7)
    static_out = torch.empty_like(hidden)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):   # warm-up (creates the kernel) off the capture
        moetune.fused_experts(hidden, w1, w2, tw, ti, out=static_out)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        moetune.fused_experts(hidden, w1, w2, tw, ti, out=static_out)
    eager = moetune.fused_experts(hidden, w1, w2, tw, ti)
    static_out.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(static_out, eager), "replay differs from eager (max |d| %g)" % (
        (static_out.float() - eager.float()).abs().max().item())
    # New inputs written into the captured buffers: the replay follows them.
    h2, tw2, ti2 = inputs(shape, M, seed=8)
    hidden.copy_(h2)
    tw.copy_(tw2)
    ti.copy_(ti2)
    graph.replay()
    eager2 = moetune.fused_experts(hidden, w1, w2, tw, ti)
    torch.cuda.synchronize()
    assert torch.equal(static_out, eager2), "replay on new inputs differs from eager"
    err = rel_l2(static_out, reference(hidden, w1, w2, tw, ti))
    assert err < TOL_BF16, "replayed output: relative L2 %.3e" % err
    return "replay == eager (bit for bit) on two inputs, rel_l2 %.2e" % err


def check_inplace():
    shape, M = "deepseek-v2-lite", 20
    w1, w2 = model_weights(shape)
    hidden, tw, ti = inputs(shape, M, seed=9)
    expect = moetune.fused_experts(hidden, w1, w2, tw, ti)
    h = hidden.clone()
    got = moetune.fused_experts(h, w1, w2, tw, ti, inplace=True)
    torch.cuda.synchronize()
    assert got.data_ptr() == h.data_ptr()
    assert torch.equal(got, expect), "in-place result differs"
    return "inplace=True equals out-of-place"


def check_cache_and_overhead():
    shape, M = "qwen3-30b-a3b", 64
    w1, w2 = model_weights(shape)
    hidden, tw, ti = inputs(shape, M, seed=11)
    out = torch.empty_like(hidden)
    moetune.fused_experts(hidden, w1, w2, tw, ti, out=out)
    before = moetune.cache_info()
    torch.cuda.synchronize()
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        moetune.fused_experts(hidden, w1, w2, tw, ti, out=out)
    host_us = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    after = moetune.cache_info()
    assert after == before, "a repeated call created objects: %s -> %s" % (before, after)
    return "no creation on repeat calls; %.1f us host time per call (incl. GPU queueing)" % host_us


def check_lookup():
    shape = "qwen3-30b-a3b"
    w1, w2 = model_weights(shape)
    hidden, tw, ti = inputs(shape, 100, seed=12)
    info = moetune.lookup(hidden, w1, w2, tw, ti)
    assert isinstance(info, moetune.LookupInfo)
    assert info.source in ("tuned", "same-cc", "defaults")
    assert info.bucket_m == 128 and info.pipeline
    ctx = moetune.get_context(torch.cuda.current_device())
    shipped = moetune.shipped_database(ctx.device_name)
    if shipped:   # the shipped database covers this model shape in bf16
        assert info.source in ("tuned", "same-cc"), "shipped %s not used: %s" % (shipped, info)
        assert info.db_path
    return "%s from %s (sku %r, tuned M %d, provenance diff %r)" % (
        info.source, info.db_path or "-", info.sku, info.tuned_m, info.provenance_diff)


def check_device_errors():
    shape, M = "deepseek-v2-lite", 4
    w1, w2 = model_weights(shape)
    hidden, tw, ti = inputs(shape, M, seed=13)
    try:
        moetune.fused_experts(hidden, w1, w2, tw, ti.long())
        raise AssertionError("int64 topk_ids accepted")
    except moetune.DtypeError as e:
        assert ".int()" in str(e)
    try:
        moetune.fused_experts(hidden.cpu(), w1, w2, tw, ti)
        raise AssertionError("a CPU tensor accepted")
    except moetune.DeviceMismatchError:
        pass
    bad = ti.clone()
    bad[2, 1] = 64   # E = 64: out of range
    try:
        moetune.fused_experts(hidden, w1, w2, tw, bad, check_errors=True)
        raise AssertionError("out-of-range topk id not reported")
    except moetune.DeviceCheckError as e:
        msg = str(e)
    assert "topk_ids[2][1]" in msg, msg
    return "int64 ids, CPU tensor and topk id 64 refused (%s)" % msg[:60]


def all_checks():
    checks = []
    for shape in SHAPES:
        for M in M_BF16:
            checks.append(("bf16 %s M=%d" % (shape, M), check_bf16, (shape, M)))
    for shape in SHAPES:
        for M in M_FP8:
            checks.append(("fp8-block %s M=%d" % (shape, M), check_fp8_block, (shape, M)))
    checks += [("cuda graph capture/replay", check_cuda_graph, ()),
               ("inplace", check_inplace, ()),
               ("kernel cache / host overhead", check_cache_and_overhead, ()),
               ("lookup introspection", check_lookup, ()),
               ("errors on the GPU", check_device_errors, ())]
    return checks


# ---------------------------------------------------------------------------
# pytest entry points
# ---------------------------------------------------------------------------

if "pytest" in sys.modules:
    import pytest

    pytestmark = pytest.mark.skipif(not HAVE_CUDA, reason="needs torch with CUDA")

    @pytest.mark.parametrize("name,fn,args", all_checks() if HAVE_CUDA else [],
                             ids=lambda v: v if isinstance(v, str) else "")
    def test_gpu(name, fn, args):
        fn(*args)


def main():
    if not HAVE_CUDA:
        print("SKIP: torch with CUDA is not available")
        print("0 passed, 0 failed, 1 skipped")
        return 0
    print("moetune %s from %s on %s" % (moetune.version(), moetune.loaded_path(),
                                        torch.cuda.get_device_name()))
    passed = failed = 0
    for name, fn, args in all_checks():
        t0 = time.perf_counter()
        try:
            detail = fn(*args)
            passed += 1
            print("PASS %s: %s (%.1fs)" % (name, detail, time.perf_counter() - t0), flush=True)
        except Exception as e:  # report and go on: every check runs
            failed += 1
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e), flush=True)
            if not isinstance(e, AssertionError):
                traceback.print_exc()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
