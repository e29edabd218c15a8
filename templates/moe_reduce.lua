-- moe_reduce: the per-token sum over topk slots (the finalize step).
-- Device code: moe_reduce.cuh. Version 4 also rounds the fp32 sums of a
-- summing GEMM2 (mt_reduce_args.y_f32).
local ELEM = { bf16 = "mt::bf16", fp16 = "mt::f16" }
return {
  family = "moe_reduce",
  version = 4,
  doc = "weigh and sum each token's expert outputs into [M, K]",
  params = {
    { name = "dtype",   abbrev = "", values = { "bf16", "fp16" } },
    { name = "THREADS", abbrev = "t", values = { 128, 256, 512 } },
  },
  default_set = { { THREADS = 256 } },
  valid = function(p, target) return true end,
  launch = function(p, target) return { threads = p.THREADS, smem = 0 } end,
  render = function(p, name)
    return mt.subst([[
#include "moe_reduce.cuh"
MT_PDL_AWARE   /* keeps the launch protocol of mt_device.cuh */
extern "C" __global__ void __launch_bounds__(${THREADS}) ${NAME}(const mt_reduce_args args)
{
    mt::moe_reduce<${ELEM}>(args);
}
]], { NAME = name, THREADS = p.THREADS, ELEM = ELEM[p.dtype] })
  end,
}
