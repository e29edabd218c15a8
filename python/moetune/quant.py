"""QuantConfig: the Python mirror of mt_quant_config (problem.h).

Constructors name the modes as vLLM users know them; from_vllm() maps
vLLM's fused_experts flags (use_fp8_w8a8, per_channel_quant, block_shape...)
onto a config. No library call is needed to build one.

May call: _lib (enums and the struct), errors. Called by: core, fused.
"""
import dataclasses
import operator

from . import _lib
from ._lib import QuantMode
from .errors import InvalidArgumentError, UnsupportedError

_NAMES = {
    QuantMode.NONE: "none",
    QuantMode.FP8_PER_TENSOR: "fp8-tensor",
    QuantMode.FP8_PER_TOKEN: "fp8-token",
    QuantMode.FP8_BLOCK: "fp8-block",
    QuantMode.INT8_PER_TENSOR: "int8-tensor",
    QuantMode.INT8_PER_TOKEN: "int8-token",
    QuantMode.INT8_BLOCK: "int8-block",
    QuantMode.W8A16: "w8a16",
    QuantMode.W4A16: "w4a16",
}


@dataclasses.dataclass(frozen=True)
class QuantConfig:
    """How weights and activations are quantized (problem.h lists the layouts).

    mode: a QuantMode; group_size: 32/64/128 for w8a16/w4a16, else 0;
    has_zero_point: w8a16/w4a16 with w1_zp/w2_zp tensors; static_act_scale:
    per-tensor w8a8 with a1_scale/a2_scale given (fused_experts sets it
    itself when the scales are passed).
    """

    mode: QuantMode = QuantMode.NONE
    group_size: int = 0
    has_zero_point: bool = False
    static_act_scale: bool = False

    def __post_init__(self):
        # Checked here, not in C: ctypes wraps an int silently (a mode of
        # 2**32 + 3 read as fp8-block), and a bad mode failed later while an
        # error message about another argument was being written.
        mode = self.mode
        if isinstance(mode, str):
            mode = next((m for m, n in _NAMES.items() if n == mode), None)
        try:
            mode = QuantMode(mode)
        except (ValueError, TypeError):
            raise InvalidArgumentError("quant mode %r is not one of %s"
                                       % (self.mode, ", ".join(_NAMES.values()))) from None
        try:
            g = operator.index(self.group_size)   # ints and integer-likes only
        except TypeError:
            g = -1
        if isinstance(self.group_size, bool) or not 0 <= g < (1 << 31):
            raise InvalidArgumentError("group_size %r must be an integer in [0, 2**31)"
                                       % (self.group_size,))
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "group_size", g)

    # Constructors -----------------------------------------------------
    @classmethod
    def none(cls):
        return cls(QuantMode.NONE)

    @classmethod
    def fp8_per_tensor(cls, static_act_scale=False):
        return cls(QuantMode.FP8_PER_TENSOR, static_act_scale=static_act_scale)

    @classmethod
    def fp8_per_token(cls):
        """Per-token activation scales x per-output-channel weight scales."""
        return cls(QuantMode.FP8_PER_TOKEN)

    @classmethod
    def fp8_block(cls):
        """[128, 128] weight blocks, 1x128 activation groups (DeepSeek-V3 style)."""
        return cls(QuantMode.FP8_BLOCK)

    @classmethod
    def int8_per_tensor(cls, static_act_scale=False):
        return cls(QuantMode.INT8_PER_TENSOR, static_act_scale=static_act_scale)

    @classmethod
    def int8_per_token(cls):
        return cls(QuantMode.INT8_PER_TOKEN)

    @classmethod
    def int8_block(cls):
        return cls(QuantMode.INT8_BLOCK)

    @classmethod
    def w8a16(cls, group_size=128, zero_point=False):
        return cls(QuantMode.W8A16, group_size=group_size, has_zero_point=bool(zero_point))

    @classmethod
    def w4a16(cls, group_size=128, zero_point=False):
        return cls(QuantMode.W4A16, group_size=group_size, has_zero_point=bool(zero_point))

    @classmethod
    def from_name(cls, name, group_size=None, zero_point=False):
        """From moetune's mode name ("fp8-block", "w4a16", ...)."""
        for mode, n in _NAMES.items():
            if n == name:
                if mode in (QuantMode.W8A16, QuantMode.W4A16):
                    return cls(mode, group_size=group_size or 128,
                               has_zero_point=bool(zero_point))
                return cls(mode)
        raise InvalidArgumentError("unknown quant mode %r (one of: %s)"
                                   % (name, ", ".join(_NAMES.values())))

    @classmethod
    def from_vllm(cls, use_fp8_w8a8=False, use_int8_w8a8=False, use_int8_w8a16=False,
                  use_int4_w4a16=False, per_channel_quant=False, block_shape=None,
                  group_size=128, has_zero_point=False, static_act_scale=False):
        """Map vLLM's fused_experts quant flags onto a config."""
        flags = [use_fp8_w8a8, use_int8_w8a8, use_int8_w8a16, use_int4_w4a16]
        if sum(bool(f) for f in flags) > 1:
            raise InvalidArgumentError("more than one of use_fp8_w8a8, use_int8_w8a8, "
                                       "use_int8_w8a16, use_int4_w4a16 is set")
        if use_int8_w8a16:
            return cls.w8a16(group_size, has_zero_point)
        if use_int4_w4a16:
            return cls.w4a16(group_size, has_zero_point)
        if not (use_fp8_w8a8 or use_int8_w8a8):
            return cls.none()
        fp8 = bool(use_fp8_w8a8)
        if block_shape is not None:
            if list(block_shape) != [_lib.QUANT_BLOCK, _lib.QUANT_BLOCK]:
                raise UnsupportedError("block_shape %r: moetune's block-wise modes use "
                                       "[128, 128]" % (list(block_shape),))
            return cls.fp8_block() if fp8 else cls.int8_block()
        if per_channel_quant:
            return cls.fp8_per_token() if fp8 else cls.int8_per_token()
        return cls(QuantMode.FP8_PER_TENSOR if fp8 else QuantMode.INT8_PER_TENSOR,
                   static_act_scale=bool(static_act_scale))

    # Properties --------------------------------------------------------
    @property
    def name(self):
        return _NAMES[QuantMode(self.mode)]

    @property
    def is_w8a8(self):
        return self.mode in (QuantMode.FP8_PER_TENSOR, QuantMode.FP8_PER_TOKEN,
                             QuantMode.FP8_BLOCK, QuantMode.INT8_PER_TENSOR,
                             QuantMode.INT8_PER_TOKEN, QuantMode.INT8_BLOCK)

    @property
    def is_weight_only(self):
        return self.mode in (QuantMode.W8A16, QuantMode.W4A16)

    @property
    def granularity(self):
        """"none", "tensor", "token", "block" or "group"."""
        m = self.mode
        if m == QuantMode.NONE:
            return "none"
        if m in (QuantMode.FP8_PER_TENSOR, QuantMode.INT8_PER_TENSOR):
            return "tensor"
        if m in (QuantMode.FP8_PER_TOKEN, QuantMode.INT8_PER_TOKEN):
            return "token"
        if m in (QuantMode.FP8_BLOCK, QuantMode.INT8_BLOCK):
            return "block"
        return "group"

    def with_static_act_scale(self, static):
        return dataclasses.replace(self, static_act_scale=bool(static))

    def to_c(self):
        return _lib.mt_quant_config(int(self.mode), int(self.group_size),
                                    int(bool(self.has_zero_point)),
                                    int(bool(self.static_act_scale)))

    def __str__(self):
        s = self.name
        if self.is_weight_only:
            s += "/g%d%s" % (self.group_size, "+zp" if self.has_zero_point else "")
        if self.static_act_scale:
            s += "/static"
        return s


def as_quant_config(q):
    """QuantConfig, a mode name string, or None (no quantization)."""
    if q is None:
        return QuantConfig.none()
    if isinstance(q, QuantConfig):
        return q
    if isinstance(q, str):
        return QuantConfig.from_name(q)
    if isinstance(q, QuantMode):
        return QuantConfig(q, group_size=128 if q in (QuantMode.W8A16, QuantMode.W4A16) else 0)
    raise InvalidArgumentError("quant must be a QuantConfig, a mode name or None, not %r"
                               % (type(q).__name__,))
