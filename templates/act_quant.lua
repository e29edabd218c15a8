-- act_quant: dynamic (or static per-tensor) quantization of activations to
-- fp8 e4m3 or int8 for the w8a8 GEMMs: the hidden rows before GEMM1 and,
-- with the activation-and-mul fused in (act = silu/gelu), the GEMM1 output
-- before GEMM2. Scales per tensor (two launches: amax, then quantize), per
-- row, or per row per 128 columns. Device code: act_quant.cuh.
local ELEM = { bf16 = "mt::bf16", fp16 = "mt::f16" }
local QTYPE = { fp8 = "mt::e4m3_tag", int8 = "mt::s8_tag" }
local GRAN = { tensor = 1, token = 2, block = 3 }
local ACT = { none = -1, silu = 0, gelu = 1 }
return {
  family = "act_quant",
  version = 3,
  doc = "quantize activation rows (optionally act-and-mul first) to fp8/int8 with scales",
  params = {
    { name = "dtype",    abbrev = "", values = { "bf16", "fp16" } },
    { name = "qtype",    abbrev = "", values = { "fp8", "int8" } },
    { name = "gran",     abbrev = "", values = { "tensor", "token", "block" } },
    { name = "act",      abbrev = "", values = { "none", "silu", "gelu" } },
    { name = "THREADS",  abbrev = "t", values = { 128, 256, 512 } },
  },
  default_set = { { THREADS = 256 } },
  valid = function(p, target)
    if p.qtype == "fp8" and target.sm < 89 then
      return false, "fp8 e4m3 conversion needs sm_89+"
    end
    return true
  end,
  launch = function(p, target) return { threads = p.THREADS, smem = 0 } end,
  render = function(p, name)
    return mt.subst([[
#include "act_quant.cuh"
MT_PDL_AWARE   /* keeps the launch protocol of mt_device.cuh */
extern "C" __global__ void __launch_bounds__(${THREADS}) ${NAME}(const mt_quant_args args)
{
    mt::act_quant<${ELEM}, ${QTYPE}, ${GRAN}, ${ACT}, ${THREADS}>(args);
}
]], { NAME = name, THREADS = p.THREADS, ELEM = ELEM[p.dtype], QTYPE = QTYPE[p.qtype],
      GRAN = GRAN[p.gran], ACT = ACT[p.act] })
  end,
}
