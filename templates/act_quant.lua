-- act_quant: dynamic (or static per-tensor) quantization of activations to
-- fp8 e4m3 or int8 for the w8a8 GEMMs: the hidden rows before GEMM1 and,
-- with the activation-and-mul fused in (act = silu/gelu), the GEMM1 output
-- before GEMM2. Scales per tensor (two launches: amax, then quantize), per
-- row, or per row per 128 columns. Device code: act_quant.cuh (ARITH div,
-- one unit a thread) and act_quant_wide.cuh (ARITH steps, or several units
-- a thread).
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
    -- UNITS and ARITH came later, without a new version: their first
    -- values are the first kernel (act_quant.cuh) and stay out of the
    -- names, which are those it had.
    -- UNITS: work units (chunks, passes over a row) a thread loads at once;
    -- more than one: act_quant_wide.cuh.
    { name = "UNITS",    abbrev = "u", values = { 1, 4 }, omit_in_name = 1 },
    -- ARITH: how x / s and silu's division are computed, bit for bit the
    -- same: "div", an IEEE division per value (act_quant.cuh's arithmetic);
    -- "steps", one reciprocal per scale and a few correctly rounded
    -- operations per value, without a branch per value (act_quant_wide.cuh).
    { name = "ARITH",    abbrev = "a", values = { "div", "steps" }, omit_in_name = "div" },
  },
  -- "steps" quantizes without an activation faster (DeepSeek-V3 fp8 M = 4096,
  -- hidden rows alone: 47.7 against 49.8 us); with silu it was slower
  -- (Qwen3 fp8 M = 4096: 73.3 against 65.5 us; docs/PERFORMANCE.md,
  -- session 15) while its guard took a branch per test and its fallbacks
  -- sat in the loop; with one flag and the fallbacks out of line it takes
  -- 1393 instructions on the common path of a pass against the divisions'
  -- 1640 (session 36; session 34 timed the same change at 0.80 the act
  -- step's time, session 37 on an H100 at 66.3 against 79.2 us, Qwen3 fp8
  -- M = 4096), so silu takes the steps; gelu keeps the divisions. Since the
  -- block-wise kernels walk stretches of rows a warp each (session 23),
  -- UNITS 4 keeps up to four passes' loads in flight per lane; the
  -- activations take it with the divisions since session 29 (their one
  -- unit a lane had them at 31 us for DeepSeek-V3 fp8's 42 MB at M = 4096
  -- and 76.5 us for Qwen3's 125 MB, session 27). The tuner takes the
  -- mode's one default (tuner/harness.c); the UNITS 1 kernels stay valid,
  -- for the databases that use them.
  default_set = { { THREADS = 256, UNITS = 4, ARITH = "steps", act = "none" },
                  { THREADS = 256, UNITS = 4, ARITH = "steps", act = "silu" },
                  { THREADS = 256, UNITS = 4, ARITH = "div", act = "gelu" } },
  valid = function(p, target)
    if p.qtype == "fp8" and target.sm < 89 then
      return false, "fp8 e4m3 conversion needs sm_89+"
    end
    return true
  end,
  launch = function(p, target) return { threads = p.THREADS, smem = 0 } end,
  render = function(p, name)
    local wide = p.ARITH == "steps" or p.UNITS > 1
    return mt.subst([[
#include "act_quant.cuh"
${WIDE_INCLUDE}MT_PDL_AWARE   /* keeps the launch protocol of mt_device.cuh */
extern "C" __global__ void __launch_bounds__(${THREADS}) ${NAME}(const mt_quant_args args)
{
    mt::${ENTRY}<${ELEM}, ${QTYPE}, ${GRAN}, ${ACT}, ${THREADS}${UNITS}>(args);
}
]], { NAME = name, THREADS = p.THREADS, ELEM = ELEM[p.dtype], QTYPE = QTYPE[p.qtype],
      GRAN = GRAN[p.gran], ACT = ACT[p.act],
      -- After the family's header, as grouped_gemm_sm90's pingpong include.
      WIDE_INCLUDE = wide and '#include "act_quant_wide.cuh"\n' or "",
      ENTRY = wide and "act_quant_wide" or "act_quant",
      -- STEPS (act_quant_wide.cuh) defaults to true: the steps kernels'
      -- lines are those they had.
      UNITS = wide and (", " .. p.UNITS .. (p.ARITH == "steps" and "" or ", false")) or "" })
  end,
}
