#!/usr/bin/env python3
"""One MoE layer of a model shape, end to end, through moetune's Python package.

Routing as an engine does it (router logits -> softmax -> torch.topk), then
moetune.fused_experts on the current CUDA stream; prints the time per call
and which kernels served it (tuned database entry or built-in defaults).
Without a GPU (or torch) it says so and exits 0.

    PYTHONPATH=python MOETUNE_LIBRARY=build/libmoetune.so \\
        python3 examples/moe_layer.py --model qwen3-30b-a3b --tokens 256 [--quant fp8-block]
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import moetune  # noqa: E402

MODELS = {   # E, topk, hidden K, intermediate N, renormalize the top-k weights
    "qwen3-30b-a3b": (128, 8, 2048, 768, True),
    "deepseek-v2-lite": (64, 6, 2048, 1408, False),
    "mixtral-8x7b": (8, 2, 4096, 14336, True),
}


def quantize_fp8_block(w, torch):
    """[E, R, C] -> e4m3 weights and fp32 scales [E, R/128, C/128] (problem.h)."""
    E, R, C = w.shape
    b = w.float().view(E, R // 128, 128, C // 128, 128)
    s = b.abs().amax(dim=(2, 4)).clamp_min(1e-12) / 448.0
    q = (b / s[:, :, None, :, None]).clamp(-448, 448).view(E, R, C).to(torch.float8_e4m3fn)
    return q.contiguous(), s.contiguous()


def positive_int(text):
    """argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1")
    return value


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="qwen3-30b-a3b")
    ap.add_argument("--tokens", type=positive_int, default=256, help="M, tokens in the batch")
    ap.add_argument("--quant", choices=["none", "fp8-block"], default="none")
    ap.add_argument("--iters", type=positive_int, default=50)
    ap.add_argument("--log", action="store_true", help="print libmoetune's lookup log")
    a = ap.parse_args()

    try:
        import torch
    except ImportError:
        print("moetune example: torch is not installed; nothing to run.")
        return 0
    if not torch.cuda.is_available():
        print("moetune example: no GPU here; nothing to run.")
        return 0
    if a.log:
        moetune.configure(log=lambda lvl, msg: print("[moetune %s] %s" % (lvl.name.lower(), msg)))

    E, topk, K, N, renorm = MODELS[a.model]
    M = a.tokens
    torch.manual_seed(0)
    dev = "cuda"
    hidden = torch.randn(M, K, device=dev).bfloat16()
    gate = (torch.randn(E, K, device=dev) / math.sqrt(K)).bfloat16()
    w1 = (torch.randn(E, 2 * N, K, device=dev) / math.sqrt(K)).bfloat16()
    w2 = (torch.randn(E, K, N, device=dev) / math.sqrt(N)).bfloat16()
    kw = {}
    if a.quant == "fp8-block":
        w1, s1 = quantize_fp8_block(w1, torch)
        w2, s2 = quantize_fp8_block(w2, torch)
        kw = dict(quant=moetune.QuantConfig.fp8_block(), w1_scale=s1, w2_scale=s2)

    def layer(x):
        # The engine's router, then the fused experts.
        probs = torch.softmax((x @ gate.t()).float(), dim=-1)
        topk_weights, topk_ids = torch.topk(probs, topk, dim=-1)
        if renorm:
            topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
        return moetune.fused_experts(x, w1, w2, topk_weights.contiguous(),
                                     topk_ids.int(), **kw)

    out = layer(hidden)           # first call: creates and caches the kernel
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(a.iters):
        out = layer(hidden)
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / a.iters

    # Which kernels served it (the router's own tensors do not matter here).
    ids = torch.zeros(M, topk, dtype=torch.int32, device=dev)
    wts = torch.zeros(M, topk, dtype=torch.float32, device=dev)
    info = moetune.lookup(hidden, w1, w2, wts, ids, **kw)
    ctx = moetune.get_context(torch.cuda.current_device())
    print("moetune %s (%s) on %s (%s)" % (moetune.version(), moetune.loaded_path(),
                                          ctx.device_name, ctx.arch))
    print("%s layer: M=%d E=%d topk=%d K=%d N=%d quant=%s" % (a.model, M, E, topk, K, N, a.quant))
    print("time per layer (router + fused experts): %.1f us over %d calls" % (ms * 1e3, a.iters))
    print("kernels: %s (bucket M=%d, tuned M=%d%s)" % (
        info.source, info.bucket_m, info.tuned_m, ", " + info.db_path if info.db_path else ""))
    if info.provenance_diff:
        print("  provenance differs from this machine in: %s" % info.provenance_diff)
    print("  pipeline: %s" % info.pipeline)
    print("out[0, :4] = %s" % out[0, :4].float().tolist())
    return 0


if __name__ == "__main__":
    sys.exit(main())
