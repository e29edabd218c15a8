-- moe_align: sort the M*topk slots by local expert, padded to the GEMM's
-- BLOCK_M (a run-time argument), for the standard activation format.
-- Device code: moe_align.cuh.
return {
  family = "moe_align",
  version = 3,
  doc = "route slots to experts, padded per expert to BLOCK_M (one CTA, or a grid in two phases)",
  params = {
    { name = "THREADS", abbrev = "t", values = { 256, 512, 1024 } },
  },
  default_set = { { THREADS = 1024 } },
  valid = function(p, target) return true end,
  launch = function(p, target) return { threads = p.THREADS, smem = 0 } end,
  render = function(p, name)
    return mt.subst([[
#include "moe_align.cuh"
MT_PDL_AWARE   /* keeps the launch protocol of mt_device.cuh */
extern "C" __global__ void __launch_bounds__(${THREADS}) ${NAME}(const mt_align_args args)
{
    mt::moe_align<${THREADS}>(args);
}
]], { NAME = name, THREADS = p.THREADS })
  end,
}
