"""Misuse that once reached C unchecked, or gave a Python error without
moetune's message (session 61's review); all without a GPU."""
import ctypes

import pytest

import moetune
from moetune import QuantConfig, QuantMode, core, fused
from conftest import needs_lib


@needs_lib
def test_closed_descriptions_say_so():
    pf, ex = moetune.PrepareFinalize("standard"), moetune.Experts("moetune", "standard")
    pf.close()
    ex.close()
    for obj, what in ((pf, "prepare/finalize"), (ex, "experts object")):
        for use in (lambda o: o.name, lambda o: o.format, lambda o: o.accepts("none"),
                    lambda o: o.handle):
            with pytest.raises(moetune.InvalidArgumentError, match="the %s is closed" % what):
                use(obj)
    assert repr(pf) == "PrepareFinalize(closed)" and repr(ex) == "Experts(closed)"


@needs_lib
def test_modular_kernel_checks_its_arguments():
    """Two handles C cannot tell apart: a swap once reached it."""
    pf, ex = moetune.PrepareFinalize("standard"), moetune.Experts("moetune", "standard")
    p = moetune.Problem(M=16, E=8, topk=2, K=128, N=128)
    with pytest.raises(moetune.InvalidArgumentError, match="context must be a Context, not NoneType"):
        moetune.ModularKernel(None, pf, ex, p)
    ctx = core.Context.__new__(core.Context)   # no GPU here: a stand-in that is one
    with pytest.raises(moetune.InvalidArgumentError, match="pf must be a PrepareFinalize, not Experts"):
        moetune.ModularKernel(ctx, ex, pf, p)
    with pytest.raises(moetune.InvalidArgumentError, match="problem must be a Problem, not tuple"):
        moetune.ModularKernel(ctx, pf, ex, (16, 8, 2, 128, 128))


def test_quant_config_checks_its_fields():
    with pytest.raises(moetune.InvalidArgumentError, match="quant mode 99 is not one of"):
        QuantConfig(mode=99)
    with pytest.raises(moetune.InvalidArgumentError, match="is not one of"):
        QuantConfig(mode=(1 << 32) + 3)   # ctypes would read fp8-block
    with pytest.raises(moetune.InvalidArgumentError, match="group_size"):
        QuantConfig(QuantMode.W8A16, group_size=(1 << 32) + 128)
    with pytest.raises(moetune.InvalidArgumentError, match="group_size"):
        QuantConfig(QuantMode.W8A16, group_size="128")
    assert QuantConfig(mode="fp8-block").mode is QuantMode.FP8_BLOCK
    assert QuantConfig(mode=3).mode is QuantMode(3)


class _Kernels:
    """ModularKernel's C calls, recorded (no GPU: the object is made by hand)."""

    def __init__(self):
        self.calls = []

    def run(self, h, M, t, ws, ws_size, stream):
        self.calls.append(ws_size)
        return 0


def test_workspace_size_is_the_buffers(fake):
    """A tensor workspace is passed with its own size, so that C refuses one
    too small (the kernel's need was passed instead, whatever the buffer)."""
    mk = core.ModularKernel.__new__(core.ModularKernel)
    rec = _Kernels()
    mk._h, mk._run, mk._ws_size = ctypes.c_void_p(1), rec.run, 1 << 20

    class Buf(fake):
        def numel(self):
            return self.shape[0]

        def element_size(self):
            return 1

    mk.run(4, {}, Buf((256,), "uint8"))
    mk.run(4, {}, 0x1000)   # a bare pointer: the kernel's need, as documented
    assert rec.calls == [256, 1 << 20]
    mk._h = None


def test_max_m_is_checked():
    assert fused._max_m(None, 5) == 5 and fused._max_m(64, 5) == 64
    with pytest.raises(moetune.ShapeError, match="max_m=4 is outside"):
        fused._max_m(4, 5)
    with pytest.raises(moetune.ShapeError, match="at most 1048576 tokens"):
        fused._max_m(1 << 21, 5)   # each call once made another largest kernel
    with pytest.raises(moetune.ShapeError, match="must be an integer"):
        fused._max_m("x", 5)


def test_closing_a_context_waits_for_its_kernels(monkeypatch):
    """close() frees the C context only once its last kernel is closed: a
    kernel still in use once ran on a freed one."""
    destroyed = []

    class FakeLib:
        def mt_context_destroy(self, h):
            destroyed.append(h)

        def mt_modular_kernel_destroy(self, h):
            pass

    monkeypatch.setattr(moetune._lib, "_lib", FakeLib())
    ctx = core.Context.__new__(core.Context)
    ctx._h, ctx._closed = "ctx", False
    ctx._kernels = core.weakref.WeakSet()
    mk = core.ModularKernel.__new__(core.ModularKernel)
    mk._h, mk.context = "mk", ctx
    ctx._kernels.add(mk)
    ctx.close()
    assert ctx.closed and destroyed == []
    with pytest.raises(moetune.InvalidArgumentError, match="the context is closed"):
        ctx.handle
    mk.close()
    assert destroyed == ["ctx"]
    ctx.close()
    assert destroyed == ["ctx"]


def test_explicit_sanitized_library_is_named(tmp_path):
    """An ASan build named explicitly aborted the process on load."""
    f = tmp_path / "libmoetune.so"
    f.write_bytes(b"\x7fELF" + b"\0" * 64 + b"libasan.so.8\0")
    with pytest.raises(moetune.MoetuneLibraryNotFound, match="built with a sanitizer"):
        moetune._lib.load(str(f))


def test_argument_types_named(fake):
    with pytest.raises(moetune.InvalidArgumentError, match="system_db must be a path"):
        moetune.Context(system_db=123)
    with pytest.raises(moetune.InvalidArgumentError, match="index after ':'"):
        moetune.tensors.parse_device("cuda:x")
    h = fake((4, 128))
    w1, w2 = fake((8, 256, 128)), fake((8, 128, 128))
    tw, ti = fake((4, 2), "float32"), fake((4, 2), "int32")
    with pytest.raises(moetune.InvalidArgumentError, match="global_num_experts must be an integer"):
        fused.prepare_call(h, w1, w2, tw, ti, global_num_experts="8")
