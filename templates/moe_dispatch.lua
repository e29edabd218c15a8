-- moe_dispatch: standard -> batched-experts layout (the batched format's
-- prepare step): token rows scattered to [local_E, max_tokens, K] with
-- per-expert counts and a slot -> row map. Device code: moe_dispatch.cuh.
local ELEM = { bf16 = "mt::bf16", fp16 = "mt::f16" }
return {
  family = "moe_dispatch",
  version = 2,
  doc = "scatter token rows to the batched-experts layout (fixed capacity, graph-capturable)",
  params = {
    { name = "dtype",   abbrev = "", values = { "bf16", "fp16" } },
    { name = "THREADS", abbrev = "t", values = { 64, 128, 256 } },
  },
  default_set = { { THREADS = 128 } },
  valid = function(p, target) return true end,
  launch = function(p, target) return { threads = p.THREADS, smem = 0 } end,
  render = function(p, name)
    return mt.subst([[
#include "moe_dispatch.cuh"
MT_PDL_AWARE   /* keeps the launch protocol of mt_device.cuh */
extern "C" __global__ void __launch_bounds__(${THREADS}) ${NAME}(const mt_dispatch_args args)
{
    mt::pdl_enter();
    mt::moe_dispatch<${ELEM}, ${THREADS}>(args);
}
]], { NAME = name, THREADS = p.THREADS, ELEM = ELEM[p.dtype] })
  end,
}
