"""moetune's Python exceptions: one class per C status, plus the checks the
package makes before calling C (wrong device, non-contiguous tensor).

Every exception derives from MoetuneError and carries `.status` (the C
mt_status as an int, or None for checks made in Python only). Classes also
derive from the closest built-in (ValueError, TypeError, MemoryError...) so
an engine's generic handlers keep working.

May call: nothing. Called by: every module.
"""


class MoetuneError(Exception):
    """Base of every moetune error. `.status`: the C status (int) or None."""

    status = None

    def __init__(self, message="", status=None):
        super().__init__(message)
        if status is not None:
            self.status = status


class MoetuneLibraryNotFound(MoetuneError, ImportError):
    """libmoetune.so could not be found or loaded. `.tried`: where it looked."""

    def __init__(self, message, tried=()):
        super().__init__(message)
        self.tried = list(tried)


class InvalidArgumentError(MoetuneError, ValueError):
    status = 1


class ShapeError(MoetuneError, ValueError):
    status = 2


class DtypeError(MoetuneError, TypeError):
    status = 3


class AlignmentError(MoetuneError, ValueError):
    status = 4


class UnsupportedError(MoetuneError):
    status = 5


class IncompatibleError(MoetuneError, ValueError):
    status = 6


class OutOfMemoryError(MoetuneError, MemoryError):
    status = 7


class NoDeviceError(MoetuneError, RuntimeError):
    """No usable GPU (the driver reports none, or the device does not exist)."""

    status = 9


class NoDriverError(NoDeviceError):
    """libcuda.so.1 could not be loaded (a machine without an NVIDIA driver)."""

    status = 8


class CudaError(MoetuneError, RuntimeError):
    status = 10


class KernelFaultError(MoetuneError, RuntimeError):
    status = 11


class MoetuneTimeoutError(MoetuneError, TimeoutError):
    status = 12


class NvrtcError(MoetuneError, RuntimeError):
    status = 13


class CublasError(MoetuneError, RuntimeError):
    status = 14


class TemplateError(MoetuneError, RuntimeError):
    status = 15


class DatabaseError(MoetuneError, RuntimeError):
    status = 16


class MoetuneIOError(MoetuneError, OSError):
    status = 17


class NotFoundError(MoetuneError, LookupError):
    status = 18


class MismatchError(MoetuneError, RuntimeError):
    status = 19


class DeviceCheckError(MoetuneError, RuntimeError):
    """A device-side check fired (e.g. a topk id outside [0, E))."""

    status = 20


class InternalError(MoetuneError, RuntimeError):
    status = 21


# Python-side checks (no C status of their own).


class DeviceMismatchError(InvalidArgumentError):
    """A tensor is on the CPU, or on another GPU than the call's."""


class LayoutError(InvalidArgumentError):
    """A tensor is not contiguous (row-major, densely packed)."""


_BY_STATUS = {cls.status: cls for cls in (
    InvalidArgumentError, ShapeError, DtypeError, AlignmentError, UnsupportedError,
    IncompatibleError, OutOfMemoryError, NoDriverError, NoDeviceError, CudaError,
    KernelFaultError, MoetuneTimeoutError, NvrtcError, CublasError, TemplateError,
    DatabaseError, MoetuneIOError, NotFoundError, MismatchError, DeviceCheckError,
    InternalError)}


def exception_class(status):
    """The exception class of a C status (MoetuneError for an unknown one)."""
    return _BY_STATUS.get(int(status), MoetuneError)


def error_from_status(status, message):
    """An exception instance for a failed C status (never for MT_OK)."""
    cls = exception_class(status)
    exc = cls(message or "moetune status %d" % int(status))
    exc.status = int(status)
    return exc
