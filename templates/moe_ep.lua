-- moe_ep: expert parallelism's device steps around the NCCL exchanges
-- (runtime/ep.c): pack (token rows -> per-peer send slots, quantized on the
-- wire for the per-token/block w8a8 modes), unpack (received slots -> the
-- experts' gathered rows, dequantized) and combine (returned expert rows ->
-- [M, K]). Device code: moe_ep.cuh.
local ELEM = { bf16 = "mt::bf16", fp16 = "mt::f16" }
-- wire -> quant tag and scale granularity (0 none, 1 per row, 2 per 128 columns)
local WIRE = {
  elem      = { q = "mt::s8_tag",   g = 0 },
  fp8token  = { q = "mt::e4m3_tag", g = 1 },
  fp8block  = { q = "mt::e4m3_tag", g = 2 },
  int8token = { q = "mt::s8_tag",   g = 1 },
  int8block = { q = "mt::s8_tag",   g = 2 },
}
return {
  family = "moe_ep",
  version = 2,
  doc = "expert parallelism: pack/unpack token rows for the NCCL exchange, combine the returned rows",
  params = {
    { name = "op",      abbrev = "", values = { "pack", "unpack", "combine" } },
    { name = "dtype",   abbrev = "", values = { "bf16", "fp16" } },
    { name = "wire",    abbrev = "", values = { "elem", "fp8token", "fp8block", "int8token", "int8block" } },
    { name = "THREADS", abbrev = "t", values = { 128, 256 } },
  },
  default_set = { { THREADS = 256 } },
  valid = function(p, target)
    if p.op == "combine" and p.wire ~= "elem" then
      return false, "combine moves element-dtype rows only"
    end
    if p.wire:sub(1, 3) == "fp8" and target.sm < 89 then
      return false, "fp8 e4m3 conversion needs sm_89+"
    end
    return true
  end,
  launch = function(p, target) return { threads = p.THREADS, smem = 0 } end,
  render = function(p, name)
    local w = WIRE[p.wire]
    local call
    if p.op == "pack" then
      call = mt.subst("mt::ep_pack<${ELEM}, ${Q}, ${G}, ${THREADS}>(args);",
                      { ELEM = ELEM[p.dtype], Q = w.q, G = w.g, THREADS = p.THREADS })
    elseif p.op == "unpack" then
      call = mt.subst("mt::ep_unpack<${ELEM}, ${Q}, ${G}, ${THREADS}>(args);",
                      { ELEM = ELEM[p.dtype], Q = w.q, G = w.g, THREADS = p.THREADS })
    else
      call = mt.subst("mt::ep_combine<${ELEM}>(args);", { ELEM = ELEM[p.dtype] })
    end
    return mt.subst([[
#include "moe_ep.cuh"
MT_PDL_AWARE   /* keeps the launch protocol of mt_device.cuh */
extern "C" __global__ void __launch_bounds__(${THREADS}) ${NAME}(const mt_ep_args args)
{
    mt::pdl_enter();
    ${CALL}
}
]], { NAME = name, THREADS = p.THREADS, CALL = call })
  end,
}
