"""Every C status maps to its own exception class, with the handle's message;
statuses the C library returns on this (GPU-less) machine arrive as those
classes."""
import pytest

import moetune
from moetune import Status
from conftest import gpu_available, needs_lib

EXPECTED = {
    Status.INVALID_ARG: (moetune.InvalidArgumentError, ValueError),
    Status.SHAPE: (moetune.ShapeError, ValueError),
    Status.DTYPE: (moetune.DtypeError, TypeError),
    Status.ALIGNMENT: (moetune.AlignmentError, ValueError),
    Status.UNSUPPORTED: (moetune.UnsupportedError, moetune.MoetuneError),
    Status.INCOMPATIBLE: (moetune.IncompatibleError, ValueError),
    Status.NO_MEMORY: (moetune.OutOfMemoryError, MemoryError),
    Status.NO_DRIVER: (moetune.NoDriverError, moetune.NoDeviceError),
    Status.NO_DEVICE: (moetune.NoDeviceError, RuntimeError),
    Status.CUDA: (moetune.CudaError, RuntimeError),
    Status.KERNEL_FAULT: (moetune.KernelFaultError, RuntimeError),
    Status.TIMEOUT: (moetune.MoetuneTimeoutError, TimeoutError),
    Status.NVRTC: (moetune.NvrtcError, RuntimeError),
    Status.CUBLAS: (moetune.CublasError, RuntimeError),
    Status.TEMPLATE: (moetune.TemplateError, RuntimeError),
    Status.DB: (moetune.DatabaseError, RuntimeError),
    Status.IO: (moetune.MoetuneIOError, OSError),
    Status.NOT_FOUND: (moetune.NotFoundError, LookupError),
    Status.MISMATCH: (moetune.MismatchError, RuntimeError),
    Status.DEVICE_CHECK: (moetune.DeviceCheckError, RuntimeError),
    Status.INTERNAL: (moetune.InternalError, RuntimeError),
}


def test_every_status_has_a_distinct_class():
    errs = [s for s in Status if s != Status.OK]
    assert set(errs) == set(EXPECTED)
    classes = [moetune.exception_class(s) for s in errs]
    assert len(set(classes)) == len(classes)


@pytest.mark.parametrize("status", sorted(EXPECTED), ids=lambda s: s.name)
def test_status_maps_to_exception(status):
    cls, base = EXPECTED[status]
    e = moetune.error_from_status(status, "the handle's message")
    assert type(e) is cls
    assert isinstance(e, moetune.MoetuneError) and isinstance(e, base)
    assert e.status == int(status) and cls.status == int(status)
    assert str(e) == "the handle's message"
    with pytest.raises(cls, match="handle's message"):
        raise e


def test_unknown_status_is_the_base_class():
    e = moetune.error_from_status(99, "")
    assert type(e) is moetune.MoetuneError and e.status == 99 and "99" in str(e)


def test_python_side_errors_are_invalid_arguments():
    assert issubclass(moetune.DeviceMismatchError, moetune.InvalidArgumentError)
    assert issubclass(moetune.LayoutError, moetune.InvalidArgumentError)
    assert issubclass(moetune.MoetuneLibraryNotFound, ImportError)


@needs_lib
def test_status_names():
    assert moetune.status_str(Status.SHAPE)
    assert moetune.status_str(Status.OK)


@needs_lib
@pytest.mark.skipif(gpu_available(), reason="a GPU is present")
def test_context_without_gpu_raises_no_device():
    with pytest.raises(moetune.NoDeviceError) as ei:
        moetune.Context(device=0)
    assert ei.value.status in (Status.NO_DRIVER, Status.NO_DEVICE)
    assert str(ei.value)   # the context's message, not empty


@needs_lib
def test_c_validation_errors_arrive_as_classes():
    p = moetune.Problem(M=4, E=8, topk=2, K=100, N=64)      # K not a multiple of 8
    with pytest.raises(moetune.AlignmentError, match="K"):
        p.validate()
    with pytest.raises(moetune.ShapeError):
        moetune.Problem(M=4, E=8, topk=2, K=4096 * 32, N=64).validate()
    with pytest.raises(moetune.DtypeError):
        moetune.Problem(M=4, E=8, topk=2, K=64, N=64, topk_ids_dtype=moetune.DType.INT64
                        ).validate()
    with pytest.raises(moetune.MoetuneError):
        moetune.Problem(M=4, E=8, topk=9, K=64, N=64).validate()
    with pytest.raises(moetune.MoetuneError, match="group"):
        moetune.Problem(M=4, E=8, topk=2, K=64, N=64,
                        quant=moetune.QuantConfig.w4a16(group_size=48)).validate()
    moetune.Problem(M=4, E=8, topk=2, K=64, N=64).validate()
