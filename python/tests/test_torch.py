"""Checks with real torch tensors on the CPU (skipped when torch is missing):
dtype, device and layout errors name the fix."""
import pytest

torch = pytest.importorskip("torch")

import moetune  # noqa: E402
from conftest import gpu_available, needs_lib  # noqa: E402

pytestmark = needs_lib


def tensors(device="cpu"):
    M, E, topk, K, N = 4, 8, 2, 128, 64
    return (torch.zeros(M, K, dtype=torch.bfloat16, device=device),
            torch.zeros(E, 2 * N, K, dtype=torch.bfloat16, device=device),
            torch.zeros(E, K, N, dtype=torch.bfloat16, device=device),
            torch.zeros(M, topk, dtype=torch.float32, device=device),
            torch.zeros(M, topk, dtype=torch.int32, device=device))


def test_cpu_tensors_are_refused():
    with pytest.raises(moetune.DeviceMismatchError, match="cpu"):
        moetune.fused_experts(*tensors())


def test_dtype_names_from_torch():
    from moetune.tensors import dtype_of
    assert dtype_of(torch.bfloat16) == moetune.DType.BF16
    assert dtype_of(torch.float8_e4m3fn) == moetune.DType.FP8_E4M3
    assert dtype_of(torch.int64) == moetune.DType.INT64
    assert dtype_of(torch.complex64) is None


def test_non_contiguous_torch_tensor():
    from moetune.tensors import info
    t = torch.zeros(8, 16).t()
    assert not info("x", t).contiguous


@pytest.mark.skipif(not gpu_available() or not torch.cuda.is_available(), reason="no GPU")
def test_int64_ids_on_gpu():
    h, w1, w2, tw, ti = tensors("cuda")
    with pytest.raises(moetune.DtypeError, match=r"\.int\(\)"):
        moetune.fused_experts(h, w1, w2, tw, ti.long())
