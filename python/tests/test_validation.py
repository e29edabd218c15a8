"""fused_experts' argument checks with fake tensors (no torch, no GPU): every
wrong argument is refused in Python or by the C validation before any GPU
work, with the package's exception; a correct call goes on to the GPU and,
on a machine without one, raises NoDeviceError."""
import pytest

import moetune
from moetune import QuantConfig
from moetune.fused import prepare_call
from conftest import FakeTensor as T, gpu_available, needs_lib

pytestmark = needs_lib
no_gpu = pytest.mark.skipif(gpu_available(), reason="a GPU is present")

M, E, TOPK, K, N = 5, 8, 2, 256, 128


def args(**over):
    a = dict(hidden=T((M, K)), w1=T((E, 2 * N, K)), w2=T((E, K, N)),
             topk_weights=T((M, TOPK), "float32"), topk_ids=T((M, TOPK), "int32"))
    a.update(over)
    return a


def call(**over):
    a = args()
    kw = {k: v for k, v in over.items() if k not in a}
    a.update({k: v for k, v in over.items() if k in a})
    return moetune.fused_experts(a["hidden"], a["w1"], a["w2"], a["topk_weights"],
                                 a["topk_ids"], **kw)


def test_problem_is_derived_from_the_tensors():
    device, p, ptrs = prepare_call(*args().values())
    assert device == 0
    assert (p.M, p.E, p.topk, p.K, p.N, p.local_E) == (M, E, TOPK, K, N, E)
    assert p.dtype == moetune.DType.BF16 and p.quant == QuantConfig.none()
    assert ptrs["out"] is None and ptrs["expert_map"] is None and ptrs["hidden"]


@no_gpu
def test_a_correct_call_needs_the_gpu():
    before = moetune.cache_info()
    with pytest.raises(moetune.NoDeviceError):
        call()
    assert moetune.cache_info()["kernels"] == before["kernels"]
    with pytest.raises(moetune.NoDeviceError):
        moetune.lookup(*args().values())


def test_zero_tokens_is_a_no_op():
    out = call(hidden=T((0, K)), topk_weights=T((0, TOPK), "float32"),
               topk_ids=T((0, TOPK), "int32"))
    assert out.shape == (0, K)


@pytest.mark.parametrize("over,exc,match", [
    (dict(topk_ids=T((M, TOPK), "int64")), moetune.DtypeError, r"\.int\(\)"),
    (dict(topk_weights=T((M, TOPK), "bfloat16")), moetune.DtypeError, r"\.float\(\)"),
    (dict(hidden=T((M, K), "float32")), moetune.DtypeError, "hidden"),
    (dict(w2=T((E, K, N), "float16")), moetune.DtypeError, "w2"),
    (dict(w1=T((E, 2 * N, K), "float8_e4m3fn")), moetune.DtypeError, "quant="),
    (dict(out=T((M, K), "float16")), moetune.DtypeError, "out"),
    (dict(w1=T((E, 2 * N, K), contiguous=False)), moetune.LayoutError, r"contiguous"),
    (dict(hidden=T((M, K), device="cpu")), moetune.DeviceMismatchError, r"\.cuda\(\)"),
    (dict(w2=T((E, K, N), device="cuda:1")), moetune.DeviceMismatchError, "cuda:1"),
    (dict(topk_ids=T((M, TOPK), "int32", device="cpu")), moetune.DeviceMismatchError, "cpu"),
    (dict(topk_weights=T((M, TOPK), "float32", offset=8)), moetune.AlignmentError, "16-byte"),
    (dict(w2=T((E, K, N + 8))), moetune.ShapeError, "w2"),
    (dict(w2=T((E - 1, K, N))), moetune.ShapeError, "w2"),
    (dict(w1=T((E, 2 * N + 1, K))), moetune.ShapeError, "2N"),
    (dict(w1=T((E, 2 * N, K + 8))), moetune.ShapeError, "w1"),
    (dict(w1=T((2 * N, K))), moetune.ShapeError, "3-D"),
    (dict(hidden=T((M, K, 1))), moetune.ShapeError, "hidden"),
    (dict(topk_ids=T((M + 1, TOPK), "int32")), moetune.ShapeError, "topk_ids"),
    (dict(topk_weights=T((M, TOPK + 1), "float32")), moetune.ShapeError, "topk_weights"),
    (dict(out=T((M, K + 8))), moetune.ShapeError, "out"),
    (dict(hidden=T((M, 100)), w1=T((E, 2 * N, 100)), w2=T((E, 100, N))),
     moetune.AlignmentError, "K"),
    (dict(topk_ids=T((M, E + 1), "int32"), topk_weights=T((M, E + 1), "float32")),
     moetune.MoetuneError, "topk"),
    (dict(hidden=[1, 2]), moetune.InvalidArgumentError, "tensor"),
    (dict(activation="relu"), moetune.InvalidArgumentError, "silu"),
    (dict(quant="fp4"), moetune.InvalidArgumentError, "quant mode"),
    (dict(w1_scale=T((E,), "float32")), moetune.InvalidArgumentError, "does not use"),
    (dict(expert_map=T((16,), "int64")), moetune.DtypeError, r"\.int\(\)"),
    (dict(expert_map=T((16, 1), "int32")), moetune.ShapeError, "expert_map"),
    (dict(global_num_experts=16), moetune.ShapeError, "expert_map"),
    (dict(max_m=2), moetune.ShapeError, "max_m"),
], ids=lambda v: None if isinstance(v, (dict, type)) else str(v)[:20])
def test_bad_arguments(over, exc, match):
    with pytest.raises(exc, match=match):
        call(**over)


def block_args(**over):
    a = dict(w1=T((E, 2 * N, K), "float8_e4m3fn"), w2=T((E, K, N), "float8_e4m3fn"),
             quant=QuantConfig.fp8_block(),
             w1_scale=T((E, 2, 2), "float32"), w2_scale=T((E, 2, 1), "float32"))
    a.update(over)
    return a


def test_fp8_block_checks():
    device, p, ptrs = prepare_call(*args(w1=block_args()["w1"], w2=block_args()["w2"]).values(),
                                   quant=QuantConfig.fp8_block(),
                                   w1_scale=T((E, 2, 2), "float32"),
                                   w2_scale=T((E, 2, 1), "float32"))
    assert p.quant == QuantConfig.fp8_block() and ptrs["w1_scale"] and ptrs["w2_scale"]
    with pytest.raises(moetune.InvalidArgumentError, match="w1_scale is required"):
        call(**block_args(w1_scale=None))
    with pytest.raises(moetune.ShapeError, match="w2_scale"):
        call(**block_args(w2_scale=T((E, 2, 2), "float32")))
    with pytest.raises(moetune.DtypeError, match="w1_scale"):
        call(**block_args(w1_scale=T((E, 2, 2), "bfloat16")))
    with pytest.raises(moetune.DtypeError, match="float8_e4m3fn"):
        call(**block_args(w1=T((E, 2 * N, K), "bfloat16")))
    with pytest.raises(moetune.InvalidArgumentError, match="computes activation scales"):
        call(**block_args(a1_scale=T((1,), "float32"), a2_scale=T((1,), "float32")))


def test_per_tensor_static_scales():
    q = QuantConfig.fp8_per_tensor()
    w = dict(w1=T((E, 2 * N, K), "float8_e4m3fn"), w2=T((E, K, N), "float8_e4m3fn"))
    base = args(**w)
    _, p, ptrs = prepare_call(*base.values(), quant=q, w1_scale=T((E,), "float32"),
                              w2_scale=T((E,), "float32"), a1_scale=T((1,), "float32"),
                              a2_scale=T((1,), "float32"))
    assert p.quant.static_act_scale and ptrs["a1_scale"] and ptrs["a2_scale"]
    with pytest.raises(moetune.InvalidArgumentError, match="both"):
        prepare_call(*base.values(), quant=q, w1_scale=T((E,), "float32"),
                     w2_scale=T((E,), "float32"), a1_scale=T((1,), "float32"))


def test_w4a16_packed_layout():
    g = 64
    w = dict(w1=T((E, 2 * N, K // 2), "uint8"), w2=T((E, K, N // 2), "uint8"))
    s = dict(w1_scale=T((E, 2 * N, K // g), "float32"), w2_scale=T((E, K, N // g), "float32"))
    _, p, _ = prepare_call(*args(**w).values(), quant=QuantConfig.w4a16(g), **s)
    assert (p.K, p.N, p.quant.group_size) == (K, N, g)
    with pytest.raises(moetune.ShapeError, match="K/2"):
        prepare_call(*args(w1=T((E, 2 * N, K), "uint8"), w2=w["w2"]).values(),
                     quant=QuantConfig.w4a16(g), **s)
    with pytest.raises(moetune.InvalidArgumentError, match="w1_zp"):
        prepare_call(*args(**w).values(), quant=QuantConfig.w4a16(g, zero_point=True), **s)
    _, p, ptrs = prepare_call(*args(**w).values(), quant=QuantConfig.w4a16(g, zero_point=True),
                              w1_zp=T((E, 2 * N, K // g), "uint8"),
                              w2_zp=T((E, K, N // g), "uint8"), **s)
    assert ptrs["w1_zero"] and ptrs["w2_zero"] and p.quant.has_zero_point
    with pytest.raises(moetune.DtypeError):   # w8a16 without zero points: int8 weights
        prepare_call(*args(w1=T((E, 2 * N, K), "uint8"), w2=T((E, K, N), "uint8")).values(),
                     quant=QuantConfig.w8a16(g),
                     w1_scale=T((E, 2 * N, K // g), "float32"),
                     w2_scale=T((E, K, N // g), "float32"))


def test_expert_map():
    em = T((4 * E,), "int32")
    _, p, ptrs = prepare_call(*args().values(), expert_map=em, global_num_experts=4 * E)
    assert p.has_expert_map and p.E == 4 * E and p.local_E == E and ptrs["expert_map"]
    with pytest.raises(moetune.ShapeError):
        prepare_call(*args().values(), expert_map=em, global_num_experts=2 * E)


@no_gpu
def test_quantized_calls_reach_the_gpu_step():
    with pytest.raises(moetune.NoDeviceError):
        call(**block_args())
    with pytest.raises(moetune.NoDeviceError):
        call(inplace=True)
