-- act_and_mul: silu/gelu(gate) * up between the GEMMs, when the activation
-- is not fused into GEMM1's epilogue. Device code: act_and_mul.cuh.
local ELEM = { bf16 = "mt::bf16", fp16 = "mt::f16" }
local ACT = { silu = 0, gelu = 1 }
return {
  family = "act_and_mul",
  version = 2,
  doc = "activation-and-mul of the [rows, 2N] GEMM1 output into [rows, N]",
  params = {
    { name = "dtype",      abbrev = "", values = { "bf16", "fp16" } },
    { name = "activation", abbrev = "", values = { "silu", "gelu" } },
    { name = "THREADS",    abbrev = "t", values = { 128, 256, 512 } },
  },
  default_set = { { THREADS = 256 } },
  valid = function(p, target) return true end,
  launch = function(p, target) return { threads = p.THREADS, smem = 0 } end,
  render = function(p, name)
    return mt.subst([[
#include "act_and_mul.cuh"
MT_PDL_AWARE   /* keeps the launch protocol of mt_device.cuh */
extern "C" __global__ void __launch_bounds__(${THREADS}) ${NAME}(const mt_act_args args)
{
    mt::act_and_mul<${ELEM}, ${ACT}>(args);
}
]], { NAME = name, THREADS = p.THREADS, ELEM = ELEM[p.dtype], ACT = ACT[p.activation] })
  end,
}
