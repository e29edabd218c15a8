"""The composable objects without a GPU: prepare/finalize and experts
descriptions, compose checks, QuantConfig."""
import pytest

import moetune
from moetune import QuantConfig, QuantMode
from conftest import needs_lib


@needs_lib
def test_prepare_finalize_and_experts():
    pf = moetune.PrepareFinalize("standard")
    assert pf.name == "standard" and pf.format == moetune.ActFormat.STANDARD
    assert pf.accepts(QuantConfig.fp8_block())
    bpf = moetune.PrepareFinalize("batched")
    assert bpf.name == "batched" and bpf.format == moetune.ActFormat.BATCHED
    ex = moetune.Experts("moetune", "standard")
    assert ex.name == "moetune-standard" and ex.accepts("none")
    cb = moetune.Experts("cublas", "batched")
    assert cb.name == "cublas-batched"
    assert cb.accepts(QuantConfig.none()) and not cb.accepts(QuantConfig.fp8_per_tensor())
    for o in (pf, bpf, ex, cb):
        o.close()
        o.close()   # twice is harmless


@needs_lib
def test_bad_kinds():
    with pytest.raises(moetune.UnsupportedError):
        moetune.Experts("cublas", "standard")
    with pytest.raises(moetune.InvalidArgumentError, match="unknown experts kind"):
        moetune.Experts("triton")
    with pytest.raises(moetune.InvalidArgumentError):
        moetune.PrepareFinalize("deepep")


@needs_lib
def test_compose_check():
    p = moetune.Problem(M=64, E=8, topk=2, K=256, N=128)
    pf, ex = moetune.PrepareFinalize("standard"), moetune.Experts("moetune", "standard")
    moetune.compose_check(pf, ex, p)
    bex = moetune.Experts("moetune", "batched")
    with pytest.raises(moetune.IncompatibleError, match="standard.*moetune-batched"):
        moetune.compose_check(pf, bex, p)
    bpf, cb = moetune.PrepareFinalize("batched"), moetune.Experts("cublas", "batched")
    moetune.compose_check(bpf, cb, p)
    pq = moetune.Problem(M=64, E=8, topk=2, K=256, N=128, quant=QuantConfig.fp8_per_tensor())
    with pytest.raises(moetune.IncompatibleError, match="quant"):
        moetune.compose_check(bpf, cb, pq)
    bad = moetune.Problem(M=64, E=8, topk=2, K=250, N=128)
    with pytest.raises(moetune.AlignmentError):
        moetune.compose_check(pf, ex, bad)
    # A valid shape whose 8-bit rows are not whole 16-byte chunks.
    p8 = moetune.Problem(M=64, E=8, topk=2, K=264, N=128, quant=QuantConfig.fp8_block())
    p8.validate()
    with pytest.raises(moetune.AlignmentError, match="multiples of 16"):
        moetune.compose_check(pf, ex, p8)
    # Not the objects it takes: its own error, not an AttributeError.
    with pytest.raises(moetune.InvalidArgumentError, match="pf must be a PrepareFinalize"):
        moetune.compose_check(None, ex, p)


def test_quant_config_constructors():
    assert QuantConfig.fp8_block().mode == QuantMode.FP8_BLOCK
    assert QuantConfig.fp8_block().granularity == "block"
    q = QuantConfig.w4a16(group_size=64, zero_point=True)
    assert (q.mode, q.group_size, q.has_zero_point) == (QuantMode.W4A16, 64, True)
    assert q.is_weight_only and not q.is_w8a8 and str(q) == "w4a16/g64+zp"
    assert QuantConfig.int8_per_token().granularity == "token"
    assert QuantConfig.fp8_per_tensor(static_act_scale=True).static_act_scale
    assert QuantConfig.none().granularity == "none"
    c = q.to_c()
    assert (c.mode, c.group_size, c.has_zero_point, c.static_act_scale) == (8, 64, 1, 0)


def test_quant_config_from_vllm():
    assert QuantConfig.from_vllm() == QuantConfig.none()
    assert QuantConfig.from_vllm(use_fp8_w8a8=True, block_shape=[128, 128]) == \
        QuantConfig.fp8_block()
    assert QuantConfig.from_vllm(use_int8_w8a8=True, per_channel_quant=True) == \
        QuantConfig.int8_per_token()
    assert QuantConfig.from_vllm(use_fp8_w8a8=True).mode == QuantMode.FP8_PER_TENSOR
    assert QuantConfig.from_vllm(use_int4_w4a16=True, group_size=32).group_size == 32
    with pytest.raises(moetune.UnsupportedError, match="128"):
        QuantConfig.from_vllm(use_fp8_w8a8=True, block_shape=[64, 64])
    with pytest.raises(moetune.InvalidArgumentError):
        QuantConfig.from_vllm(use_fp8_w8a8=True, use_int8_w8a8=True)
    with pytest.raises(moetune.InvalidArgumentError, match="unknown quant mode"):
        QuantConfig.from_name("fp4")


def test_problem_key_ignores_m_only():
    a = moetune.Problem(M=1, E=8, topk=2, K=64, N=64)
    b = moetune.Problem(M=512, E=8, topk=2, K=64, N=64)
    assert a.key() == b.key() and hash(a.key()) == hash(b.key())
    for change in (dict(quant=QuantConfig.fp8_block()), dict(topk=3), dict(N=128),
                   dict(activation=moetune.Activation.GELU), dict(dtype=moetune.DType.FP16),
                   dict(apply_router_weight_on_input=True)):
        c = moetune.Problem(**{**b.__dict__, **change})
        assert c.key() != a.key(), change


@needs_lib
def test_problem_to_c_round_trip():
    p = moetune.Problem(M=3, E=16, topk=4, K=128, N=64, quant=QuantConfig.w4a16(32, True),
                        has_expert_map=True, local_E=4, apply_router_weight_on_input=True)
    c = p.to_c()
    assert (c.M, c.E, c.topk, c.K, c.N, c.local_E) == (3, 16, 4, 128, 64, 4)
    assert (c.quant.mode, c.quant.group_size, c.quant.has_zero_point) == (QuantMode.W4A16, 32, 1)
    assert c.has_expert_map == 1 and c.apply_router_weight_on_input == 1
    p.validate()
    # Names are taken for the enums; integers ctypes would wrap are refused.
    assert moetune.Problem(M=3, E=16, topk=4, K=128, N=64, dtype="fp16").to_c().dtype == \
        moetune.DType.FP16
    for bad in (dict(M=2**64 + 16), dict(E=-2**63 - 1), dict(K="big"), dict(K="128"), dict(N=64.5),
                dict(dtype="bfloat17")):
        fields = dict(M=3, E=16, topk=4, K=128, N=64)
        fields.update(bad)
        with pytest.raises(moetune.InvalidArgumentError):
            moetune.Problem(**fields).to_c()
