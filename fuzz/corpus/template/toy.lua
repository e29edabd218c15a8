-- A small test family with known arithmetic (see tests/test_gen.c):
-- 2 dtypes x 4 BLOCKs x 3 STAGES = 24 points; valid() prunes by shared
-- memory (BLOCK * STAGES * 256 bytes) and refuses f16 with BLOCK 32.
local cuda_type = { f32 = "float", f16 = "__half" }

return {
  family = "toy",
  version = 1,
  doc = "test family: a tiny kernel with a shared-memory footprint",
  params = {
    { name = "dtype", abbrev = "", values = { "f32", "f16" } },
    { name = "BLOCK", abbrev = "b", values = { 32, 64, 128, 256 } },
    { name = "STAGES", abbrev = "s", values = { 1, 2, 3 } },
  },
  default_set = {
    { BLOCK = 64 },
    { dtype = "f16", STAGES = 1 },
  },
  valid = function(p, target)
    if p.BLOCK * p.STAGES * 256 > target.smem_per_block then
      return false, "shared memory exceeds the target"
    end
    if p.dtype == "f16" and p.BLOCK == 32 then
      return false, "f16 needs BLOCK >= 64"
    end
    return true
  end,
  launch = function(p, target)
    return { threads = p.BLOCK, smem = p.BLOCK * p.STAGES * 256 }
  end,
  render = function(p, name)
    return mt.subst([[
#include "toy.cuh"

extern "C" __global__ void ${NAME}(${T} *out)
{
    toy_body<${T}, ${BLOCK}, ${STAGES}>(out);
}
]], { NAME = name, T = cuda_type[p.dtype], BLOCK = p.BLOCK, STAGES = p.STAGES })
  end,
}
