-- grouped_gemm: both GEMMs of the fused-MoE experts stage on tensor cores.
-- GEMM1 (hidden x w1[e]^T, optionally with silu/gelu-and-mul fused into the
-- epilogue) and GEMM2 (intermediate x w2[e]^T, router weight applied) are the
-- same kernel with other run-time arguments. Every quant mode of
-- moetune/problem.h is a value of `quant`; the weight-only group size and the
-- presence of zero points are run-time arguments (one kernel serves groups
-- 32/64/128 with or without zero points). Device code: grouped_gemm.cuh.

local ELEM = { bf16 = "mt::bf16", fp16 = "mt::f16" }
-- "sum" stores like "store" (EPI 0) and declares SUM_TOPK: GEMM2 adds its
-- rows into their tokens' fp32 rows (gemm_tile.cuh write_tile).
local EPI = { store = 0, silu = 1, gelu = 2, sum = 0 }
local FORMAT = { standard = 0, batched = 1 }
-- Values of mt_quant_mode.
local QUANT = { none = 0, ["fp8-tensor"] = 1, ["fp8-token"] = 2, ["fp8-block"] = 3,
                ["int8-tensor"] = 4, ["int8-token"] = 5, ["int8-block"] = 6,
                w8a16 = 7, w4a16 = 8 }
local QUANTS = { "none", "fp8-tensor", "fp8-token", "fp8-block", "int8-tensor", "int8-token",
                 "int8-block", "w8a16", "w4a16" }

local function bits(quant)
  local q = QUANT[quant]
  local w8a8 = q >= 1 and q <= 6
  local a = w8a8 and 8 or 16
  local b = (w8a8 or quant == "w8a16") and 8 or (quant == "w4a16" and 4 or 16)
  return a, b, w8a8
end

local function shape(p)
  local s = {}
  s.warps = p.WARPS_M * p.WARPS_N
  s.threads = s.warps * 32
  s.wm = p.BLOCK_M // p.WARPS_M
  s.wn = p.BLOCK_N // p.WARPS_N
  local abits, bbits = bits(p.quant)
  s.a_row = p.BLOCK_K * abits // 8
  s.b_row = p.BLOCK_K * bbits // 8
  local pipeline = p.STAGES * (p.BLOCK_M * (s.a_row + 16) + p.BLOCK_N * (s.b_row + 16))
  -- The fp32 epilogue tile, its rows 8 floats past the width (epi_pitch,
  -- gemm_tile.cuh).
  local epilogue = p.BLOCK_M * (p.BLOCK_N + 8) * 4
  s.smem = math.max(pipeline, epilogue)
  return s
end

-- Default tiles, one per BLOCK_M that the untuned default rule picks
-- (common/defaults.c: 16, 64 or 128 by rows per expert, SPLIT_K = 1), per
-- operand family, and one split-K decode tile (BLOCK_K 128 for 8-bit A, so
-- that a K slice still moves 128 bytes of A per row per stage) that the
-- tuner may pick for small M: being in the default set, the GPU test
-- matrices run it in every quant mode and format.
local TILES16 = {
  { BLOCK_M = 16,  BLOCK_N = 64,  BLOCK_K = 64, GROUP_M = 1, WARPS_M = 1, WARPS_N = 4, STAGES = 4, SPLIT_K = 1 },
  { BLOCK_M = 64,  BLOCK_N = 128, BLOCK_K = 32, GROUP_M = 8, WARPS_M = 2, WARPS_N = 2, STAGES = 4, SPLIT_K = 1 },
  { BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 32, GROUP_M = 8, WARPS_M = 2, WARPS_N = 4, STAGES = 3, SPLIT_K = 1 },
  { BLOCK_M = 16,  BLOCK_N = 64,  BLOCK_K = 64, GROUP_M = 1, WARPS_M = 1, WARPS_N = 4, STAGES = 4, SPLIT_K = 4 },
}
-- 8-bit operands: the decode tile reads 128-byte weight rows per K step
-- (BLOCK_K 128; the 64-wide tile read 64-byte runs and was 22 % slower at
-- Qwen3-30B-A3B fp8 M = 64 on the H200, docs/measurements/2026-12-02-s4).
local TILES8 = {
  { BLOCK_M = 16,  BLOCK_N = 64,  BLOCK_K = 128, GROUP_M = 1, WARPS_M = 1, WARPS_N = 2, STAGES = 3, SPLIT_K = 1 },
  { BLOCK_M = 64,  BLOCK_N = 128, BLOCK_K = 64,  GROUP_M = 8, WARPS_M = 2, WARPS_N = 2, STAGES = 3, SPLIT_K = 1 },
  { BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 64,  GROUP_M = 8, WARPS_M = 2, WARPS_N = 4, STAGES = 3, SPLIT_K = 1 },
  { BLOCK_M = 16,  BLOCK_N = 64,  BLOCK_K = 128, GROUP_M = 1, WARPS_M = 1, WARPS_N = 4, STAGES = 4, SPLIT_K = 4 },
}
local WONLY_TILES = TILES16
local defaults = {}
for _, q in ipairs(QUANTS) do
  local _, _, w8a8 = bits(q)
  local list = q == "none" and TILES16 or (w8a8 and TILES8 or WONLY_TILES)
  for _, t in ipairs(list) do
    local d = { quant = q, PREFETCH = 0 }
    for k, v in pairs(t) do d[k] = v end
    defaults[#defaults + 1] = d
  end
end

return {
  family = "grouped_gemm",
  version = 6,
  doc = "grouped GEMM of the MoE experts (mma.sync, cp.async pipeline, fused epilogues, quant modes)",
  params = {
    { name = "dtype",    abbrev = "",  values = { "bf16", "fp16" } },
    { name = "quant",    abbrev = "",  values = QUANTS },
    { name = "format",   abbrev = "",  values = { "standard", "batched" } },
    -- "sum" (GEMM2 of the standard format): the topk sum in the epilogue,
    -- by fp32 reductions into the output rows (runtime/moe_launch.c).
    { name = "epilogue", abbrev = "",  values = { "store", "silu", "gelu", "sum" } },
    { name = "BLOCK_M",  abbrev = "m", values = { 16, 32, 64, 128 } },
    { name = "BLOCK_N",  abbrev = "n", values = { 32, 64, 128, 256 } },
    { name = "BLOCK_K",  abbrev = "k", values = { 32, 64, 128, 256 } },
    { name = "GROUP_M",  abbrev = "g", values = { 1, 8 } },
    { name = "WARPS_M",  abbrev = "wm", values = { 1, 2, 4 } },
    { name = "WARPS_N",  abbrev = "wn", values = { 1, 2, 4 } },
    { name = "STAGES",   abbrev = "s", values = { 2, 3, 4, 5, 6, 8 } },
    -- CTAs per output tile, each summing a contiguous slice of K; the last
    -- one to finish adds the slices in split order and runs the epilogue.
    { name = "SPLIT_K",  abbrev = "sk", values = { 1, 2, 4, 8 },
      -- Split-K pays a round trip of the fp32 tile through global memory
      -- per slice: only worth it for decode tiles, whose few CTAs leave
      -- SMs idle.
      only_if = function(p)
        if p.BLOCK_M > 32 then return false, "split-K only for decode tiles (BLOCK_M <= 32)" end
        if p.GROUP_M ~= 1 then return false, "split-K tiles take GROUP_M = 1" end
        return true
      end },
    -- L2 prefetch size hint of the weight copies (bytes; 0: none): the L2
    -- fetches whole 128/256-byte blocks of a weight row from DRAM, the
    -- next K step's bytes with this one's.
    { name = "PREFETCH", abbrev = "pf", values = { 0, 128, 256 } },
  },
  default_set = defaults,
  valid = function(p, target)
    local s = shape(p)
    if p.epilogue == "sum" and p.format ~= "standard" then
      return false, "the topk sum is GEMM2's of the standard format"
    end
    local q = QUANT[p.quant]
    local block = q == 3 or q == 6
    if q >= 1 and q <= 3 and target.sm < 89 then
      return false, "fp8 tensor cores need sm_89+"
    end
    if s.wm < 16 or s.wm % 16 ~= 0 then return false, "warp tile rows not a multiple of 16" end
    if s.wn < 16 or s.wn % 16 ~= 0 then return false, "warp tile cols not a multiple of 16" end
    if s.threads < 64 then return false, "fewer than 2 warps" end
    -- One MMA step eats 32 bytes of an A row.
    if s.a_row % 32 ~= 0 then return false, "BLOCK_K too small for the operand width" end
    -- Block scales are folded per 128-wide K block: BLOCK_K must divide it.
    if block and 128 % p.BLOCK_K ~= 0 then return false, "BLOCK_K does not divide the 128 scale block" end
    -- Accumulators per thread (block modes keep a second fp32 set): beyond
    -- 128 the kernel spills.
    if s.wm * s.wn // 32 * (block and 2 or 1) > 128 then
      return false, "accumulators exceed the register budget"
    end
    if p.STAGES * p.BLOCK_K < 96 and p.BLOCK_M >= 64 then
      return false, "pipeline too shallow to hide memory latency"
    end
    if s.smem > target.smem_per_block then return false, "shared memory exceeds the target" end
    return true
  end,
  launch = function(p, target)
    local s = shape(p)
    return { threads = s.threads, smem = s.smem }
  end,
  render = function(p, name)
    local s = shape(p)
    return mt.subst([[
#include "grouped_gemm.cuh"
MT_PDL_AWARE   /* keeps the launch protocol of mt_device.cuh */
struct ${NAME}_cfg {
    using T = ${ELEM};
    static constexpr int QUANT = ${QUANT}, FORMAT = ${FORMAT}, EPI = ${EPI};
    static constexpr int BM = ${BM}, BN = ${BN}, BK = ${BK}, GROUP_M = ${GROUP_M};
    static constexpr int WARPS_M = ${WARPS_M}, WARPS_N = ${WARPS_N}, STAGES = ${STAGES};
    static constexpr int SPLIT_K = ${SPLIT_K}, PREFETCH = ${PREFETCH};
${SUM_TOPK}};
extern "C" __global__ void __launch_bounds__(${THREADS}) ${NAME}(const mt_gemm_args args)
{
    mt::grouped_gemm<${NAME}_cfg>(args);
}
]], { NAME = name, ELEM = ELEM[p.dtype], QUANT = QUANT[p.quant], FORMAT = FORMAT[p.format],
      EPI = EPI[p.epilogue], BM = p.BLOCK_M, BN = p.BLOCK_N, BK = p.BLOCK_K, GROUP_M = p.GROUP_M,
      WARPS_M = p.WARPS_M, WARPS_N = p.WARPS_N, STAGES = p.STAGES, SPLIT_K = p.SPLIT_K,
      PREFETCH = p.PREFETCH, THREADS = s.threads,
      SUM_TOPK = p.epilogue == "sum" and "    static constexpr int SUM_TOPK = 1;\n" or "" })
  end,
}
