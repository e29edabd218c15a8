-- grouped_gemv: the experts' GEMMs for decode batches (a few rows per
-- expert) as matrix-vector products on the CUDA cores, bound by reading the
-- weights of the experts hit. Same argument (mt_gemm_args), role (gemm1 or
-- gemm2) and parameter names as grouped_gemm, so the tuner and the runtime
-- treat it like the tensor-core families (mt_gemm_families); BLOCK_M is the
-- alignment's row block (8 or 16: the rows of a block are compacted, padding
-- costs nothing), or 1: a row block per slot, routed from topk_ids by the
-- kernel itself, so the pipeline needs no alignment step (standard format;
-- the kernel argument is mt_gemv_slot_args, gemv_args.h). BLOCK_N is the
-- weight rows of a CTA. The epilogue "sum" (BLOCK_M 1, GEMM2 only) takes a
-- row block per token and adds its topk slots' products itself, so the
-- pipeline has no reduce step either. The epilogue "lastsum" (BLOCK_M 1,
-- GEMM2 only) stores a row per slot as "store" does, and the last of a
-- token's topk CTAs of each column block to finish adds their rows into
-- the output, by the reduce step's own code (the same bits): no reduce
-- launch, at the store's CTA count. AQUANT "cta" (BLOCK_M 1, the block-
-- scaled 8-bit modes, GEMM1 only): each CTA quantizes its slot's token row
-- of the 16-bit hidden states itself, into shared memory, by the act_quant
-- step's own code (the same bytes and scales), so that the pipeline has no
-- quant step. AQUANT "silu" or "gelu" (BLOCK_M 1, the block-scaled 8-bit
-- modes, GEMM2 only: "store", "sum" or "lastsum"): each CTA takes GEMM1's
-- stored gate and up rows of its slots (16-bit, 2 x its K wide), applies
-- the activation-and-mul and quantizes the result into shared memory, by
-- the act step's own code (the same bytes and scales), so that the
-- pipeline has no act step either. OQUANT "last" (BLOCK_M 1, the
-- block-scaled 8-bit modes, GEMM1 with the activation fused, "silu" or
-- "gelu"): GEMM1 stores its activated columns as the fused epilogue does,
-- and the last CTA of a slot's to finish each 128-column group quantizes
-- that group for GEMM2, by the act step's own code again (the same bytes
-- and scales): no act step, each group quantized once. CHAIN > 0
-- (BLOCK_M 1, GEMM1 with the activation fused; 16-bit operands, or the
-- block modes with AQUANT "cta" and OQUANT "last"): the kernel runs GEMM2
-- too, in the same launch, as the tile of CHAIN weight rows whose last CTA
-- sums the topk ("lastsum", the same WARPS, UNROLL and AHEAD), so that a
-- decode batch is one launch; the pipeline names that GEMM2 tile, which the runtime does
-- not launch. Device code: grouped_gemv.cuh, grouped_gemv_chain.cuh.

local ELEM = { bf16 = "mt::bf16", fp16 = "mt::f16" }
-- "sum" and "lastsum" store like "store" (the tile_shape of
-- gemm_tile.cuh): the summing is their own.
local EPI = { store = 0, silu = 1, gelu = 2, sum = 0, lastsum = 0 }
local FORMAT = { standard = 0, batched = 1 }
-- Values of mt_quant_mode; the weight-only modes have no variant here.
local QUANT = { none = 0, ["fp8-tensor"] = 1, ["fp8-token"] = 2, ["fp8-block"] = 3,
                ["int8-tensor"] = 4, ["int8-token"] = 5, ["int8-block"] = 6 }
local QUANTS = { "none", "fp8-tensor", "fp8-token", "fp8-block", "int8-tensor", "int8-token",
                 "int8-block" }

local function shape(p) return { threads = p.WARPS * 32 } end
-- A warp takes pairs of weight rows (BLOCK_N / 2 pairs per CTA), each pair
-- the 32 / rg lanes of it along K: do `rows` weight rows a CTA give each of
-- its warps rg = 1, 2 or 4 pairs?
local function rows_split_evenly(rows, warps)
  local pairs = rows // 2
  local rg = pairs // warps
  return pairs % warps == 0 and (rg == 1 or rg == 2 or rg == 4)
end

-- Four default tiles per mode (every dtype, format and epilogue), so the GPU
-- test matrices run both lane layouts: 32 lanes per pair (one pair a warp),
-- and 8 (four pairs a warp, for short K such as DeepSeek-V3's GEMM2), and
-- the routing by slot (standard format only: the batched one prunes it)
-- with and without the lookahead; in the block modes, last (so that a
-- lookup of a default by its shape meets the step-fed tile first), that
-- tile quantizing its own A rows: GEMM1's (AQUANT "cta") and GEMM2's after
-- either activation (AQUANT "silu", "gelu"); and that tile quantizing its
-- activated output for GEMM2 (OQUANT "last"), step-fed and with AQUANT
-- "cta", and a tile of 64 weight rows with it. Each names AQUANT and
-- OQUANT, which would otherwise take every value.
local function block_scaled(q) return q == "fp8-block" or q == "int8-block" end
local defaults = {}
for _, q in ipairs(QUANTS) do
  for _, t in ipairs({
      { BLOCK_M = 8,  BLOCK_N = 16, WARPS = 8, UNROLL = 4, AHEAD = 1 },
      { BLOCK_M = 16, BLOCK_N = 32, WARPS = 4, UNROLL = 2, AHEAD = 0 },
      { BLOCK_M = 1,  BLOCK_N = 16, WARPS = 4, UNROLL = 4, AHEAD = 1 },
      { BLOCK_M = 1,  BLOCK_N = 16, WARPS = 4, UNROLL = 4, AHEAD = 0 } }) do
    local d = { quant = q, AQUANT = "step", OQUANT = "step", CHAIN = 0, SM_WARPS = 0 }
    for k, v in pairs(t) do d[k] = v end
    defaults[#defaults + 1] = d
  end
end
for _, q in ipairs(QUANTS) do
  if block_scaled(q) then
    for _, aq in ipairs({ "cta", "silu", "gelu" }) do
      defaults[#defaults + 1] = { quant = q, BLOCK_M = 1, BLOCK_N = 16, WARPS = 4, UNROLL = 4, AHEAD = 1,
                                  AQUANT = aq, OQUANT = "step", CHAIN = 0, SM_WARPS = 0 }
    end
    for _, aq in ipairs({ "step", "cta" }) do
      defaults[#defaults + 1] = { quant = q, BLOCK_M = 1, BLOCK_N = 16, WARPS = 4, UNROLL = 4, AHEAD = 1,
                                  AQUANT = aq, OQUANT = "last", CHAIN = 0, SM_WARPS = 0 }
    end
    -- and one of 64 weight rows: 32 columns a CTA, four CTAs a group (the
    -- tiles above: 8 columns, sixteen a group), with its step-fed twin
    -- (its GEMM2 sibling, and the tests' reference)
    for _, oq in ipairs({ "last", "step" }) do
      defaults[#defaults + 1] = { quant = q, BLOCK_M = 1, BLOCK_N = 64, WARPS = 8, UNROLL = 2, AHEAD = 0,
                                  AQUANT = "step", OQUANT = oq, CHAIN = 0, SM_WARPS = 0 }
    end
  end
end
-- A chained tile per mode that has them (16-bit operands and the block
-- modes): the one-token tile above running GEMM2 as its 16-row "lastsum"
-- twin, which the entries above hold (the pipeline's GEMM2, and with the
-- unchained tile the tests' reference); and that tile again with its
-- registers capped for six CTAs an SM (SM_WARPS 24: 80 registers, where
-- ptxas gives 94 to 128 uncapped), whose reference is the uncapped one.
for _, q in ipairs(QUANTS) do
  if q == "none" or block_scaled(q) then
    for _, sw in ipairs({ 0, 24 }) do
      defaults[#defaults + 1] = { quant = q, BLOCK_M = 1, BLOCK_N = 16, WARPS = 4, UNROLL = 4, AHEAD = 1,
                                  AQUANT = q == "none" and "step" or "cta",
                                  OQUANT = q == "none" and "step" or "last", CHAIN = 16, SM_WARPS = sw }
    end
  end
end
-- A 16-bit one-token tile of eight warps, GEMM1 and GEMM2, uncapped and
-- capped at 48 warps an SM (six CTAs, 40 registers a thread where ptxas
-- gives it 48, so five), so that the GPU tests run a cap above 24 and
-- compare its output with the uncapped pipeline's, byte for byte.
for _, sw in ipairs({ 0, 48 }) do
  for _, epi in ipairs({ "silu", "store" }) do
    defaults[#defaults + 1] = { quant = "none", epilogue = epi, BLOCK_M = 1, BLOCK_N = 16, WARPS = 8, UNROLL = 2,
                                AHEAD = 0, AQUANT = "step", OQUANT = "step", CHAIN = 0, SM_WARPS = sw }
  end
end
-- Static shared memory of a CTA that quantizes its A rows (AQUANT other
-- than "step"), at least: the quantized row, gemv_args.h's
-- MT_GEMV_AQ_MAX_K bytes, and its scales (test_gen_builtin checks the
-- cap rule below against that header).
local AQ_SMEM = 16384 + 16384 // 128 * 4
-- The activation a GEMM2 applies before it quantizes its A rows (AQUANT
-- "silu", "gelu"; act_quant.cuh's numbering), nil for the others.
local AQ_ACT = { silu = 0, gelu = 1 }

return {
  family = "grouped_gemv",
  version = 4,
  doc = "grouped matrix-vector products of the MoE experts for decode (CUDA cores, weight-bandwidth bound)",
  params = {
    { name = "dtype",    abbrev = "",  values = { "bf16", "fp16" } },
    { name = "quant",    abbrev = "",  values = QUANTS },
    { name = "format",   abbrev = "",  values = { "standard", "batched" } },
    { name = "epilogue", abbrev = "",  values = { "store", "silu", "gelu", "sum", "lastsum" } },
    { name = "BLOCK_M",  abbrev = "m", values = { 1, 8, 16 } },
    { name = "BLOCK_N",  abbrev = "n", values = { 8, 16, 32, 64 } },
    { name = "WARPS",    abbrev = "w", values = { 4, 8 } },
    -- 16-byte weight chunks a lane has in flight per weight row (8: one
    -- row a pass only, for the registers).
    { name = "UNROLL",   abbrev = "u", values = { 2, 4, 8 } },
    -- 1: a one-row pass (and the topk sum) loads the next round of chunks
    -- before it multiplies this one: two rounds in flight, for long K, at
    -- twice the chunk registers (version 4).
    { name = "AHEAD",    abbrev = "a", values = { 0, 1 } },
    -- Who quantizes the A rows in the block modes: the quant or act step
    -- ("step"), or each CTA its own rows: GEMM1's hidden rows as they are
    -- ("cta"), GEMM2's after the activation-and-mul of GEMM1's stored
    -- output ("silu", "gelu"). The kernels before it are "step" and keep
    -- their names.
    { name = "AQUANT",   abbrev = "aq", values = { "step", "cta", "silu", "gelu" }, omit_in_name = "step",
      only_if = function(p)
        if not block_scaled(p.quant) then
          return false, "a CTA quantizes its own A rows in the block-scaled modes only"
        elseif p.BLOCK_M ~= 1 then
          return false, "a CTA quantizes its own A rows with a row block per slot: BLOCK_M 1"
        end
        return true
      end },
    -- Who quantizes GEMM1's activated output for GEMM2 in the block modes:
    -- the act step ("step"), or the last CTA of each 128-column group of a
    -- slot ("last"). The kernels before it are "step" and keep their names.
    { name = "OQUANT",   abbrev = "oq", values = { "step", "last" }, omit_in_name = "step",
      only_if = function(p)
        if not block_scaled(p.quant) then
          return false, "the last CTA of a group quantizes GEMM1's output in the block-scaled modes only"
        elseif p.BLOCK_M ~= 1 then
          return false, "the last CTA of a slot's group counts its CTAs: BLOCK_M 1"
        elseif p.epilogue ~= "silu" and p.epilogue ~= "gelu" then
          return false, "the last CTA of a group quantizes activated columns: a fused activation (GEMM1)"
        end
        return true
      end },
    -- A GEMM1 that runs GEMM2 in the same launch: the weight rows of that
    -- GEMM2's tile (its BLOCK_N), 0 for none. The kernels before it are 0
    -- and keep their names.
    { name = "CHAIN",    abbrev = "c",  values = { 0, 8, 16, 32, 64 }, omit_in_name = 0,
      only_if = function(p)
        if p.BLOCK_M ~= 1 or (p.epilogue ~= "silu" and p.epilogue ~= "gelu") then
          return false, "a chained GEMM2 follows a GEMM1 of a row block per slot with the activation fused"
        elseif p.quant ~= "none" and not block_scaled(p.quant) then
          return false, "a chained launch quantizes GEMM2's A rows in the block modes only"
        elseif block_scaled(p.quant) and (p.AQUANT ~= "cta" or p.OQUANT ~= "last") then
          return false, "a chained launch of the block modes quantizes in its CTAs: AQUANT cta, OQUANT last"
        end
        return true
      end },
    -- The warps an SM is to hold at once (a one-token tile, BLOCK_M 1):
    -- __launch_bounds__'s minimum of SM_WARPS / WARPS CTAs, so that ptxas
    -- caps the registers at 64K / (32 x SM_WARPS) a thread (16: 128, 20:
    -- 96, 24: 80, 32: 64, 40: 48, 48: 40, 64: 32) and spills what does not
    -- fit; 0, the compiler's choice. A weight stream keeps more loads in
    -- flight with more CTAs an SM, at the cost of the spills (ptxas gives
    -- the fp8 block-wise one-token tiles 117 to 128 registers: 4 CTAs of 4
    -- warps an SM). And a grid of a few waves ends in a partial one: Qwen3
    -- bf16's GEMM1 at one token is 768 CTAs of 8 warps, at 48 to 54
    -- registers 4 or 5 an SM (528 or 660 on 132 SMs), 6 under a cap of 48
    -- warps (792, one wave; Nsight Compute on the H100, session 49). The
    -- kernels before it are 0 and keep their names.
    { name = "SM_WARPS", abbrev = "o",  values = { 0, 16, 20, 24, 32, 40, 48, 64 }, omit_in_name = 0,
      only_if = function(p)
        if p.BLOCK_M ~= 1 then return false, "a register cap is for the one-token tiles: BLOCK_M 1" end
        return true
      end },
  },
  default_set = defaults,
  valid = function(p, target)
    local q = QUANT[p.quant]
    if q >= 1 and q <= 3 and target.sm < 89 then
      return false, "fp8 conversions need sm_89+"
    end
    if p.BLOCK_M == 1 and p.format ~= "standard" then
      return false, "a row block per slot needs the standard format's topk ids"
    end
    if p.UNROLL == 8 and p.BLOCK_M ~= 1 then
      return false, "UNROLL 8 holds the chunks of one row a pass: BLOCK_M 1"
    end
    if p.epilogue == "sum" and p.BLOCK_M ~= 1 then
      return false, "the topk sum takes a row block per token: BLOCK_M 1"
    end
    if p.epilogue == "lastsum" and p.BLOCK_M ~= 1 then
      return false, "the last CTA's topk sum counts a token's slots: BLOCK_M 1"
    end
    -- (Where AQUANT, OQUANT, CHAIN and SM_WARPS may leave their first
    -- values is their only_if, above; the rules on which value are here.)
    if p.AQUANT == "cta" and (p.epilogue == "sum" or p.epilogue == "lastsum") then
      return false, "the topk sum is GEMM2's, whose A rows come from GEMM1: AQUANT silu or gelu"
    end
    if AQ_ACT[p.AQUANT] and EPI[p.epilogue] ~= 0 then
      return false, "a CTA that activates its A rows is a GEMM2: epilogue store, sum or lastsum"
    end
    if p.CHAIN > 0 and not rows_split_evenly(p.CHAIN, p.WARPS) then
      return false, "CHAIN / 2 pairs do not give each warp 1, 2 or 4"
    end
    if p.SM_WARPS > 0 then
      if p.SM_WARPS % p.WARPS ~= 0 then
        return false, "SM_WARPS is not a whole number of CTAs of WARPS warps"
      end
      if p.SM_WARPS * 32 > target.threads_per_sm then
        return false, "SM_WARPS is more warps than an SM of the target holds"
      end
      if p.AQUANT ~= "step" and p.SM_WARPS // p.WARPS * (AQ_SMEM + 1024) > target.smem_per_sm then
        return false, "SM_WARPS is more self-quantizing CTAs than an SM's shared memory holds"
      end
    end
    if not rows_split_evenly(p.BLOCK_N, p.WARPS) then
      return false, "BLOCK_N / 2 pairs do not give each warp 1, 2 or 4"
    end
    return true
  end,
  launch = function(p, target)
    return { threads = shape(p).threads, smem = 0 }
  end,
  render = function(p, name)
    local s = shape(p)
    local chain = p.CHAIN > 0
    return mt.subst([[
#include "grouped_gemv.cuh"
${OWN_QUANT}MT_PDL_AWARE   /* keeps the launch protocol of mt_device.cuh */
struct ${NAME}_cfg {
    using T = ${ELEM};
    static constexpr int QUANT = ${QUANT}, FORMAT = ${FORMAT}, EPI = ${EPI};
    static constexpr int BM = ${BM}, BN = ${BN}, WARPS = ${WARPS}, UNROLL = ${UNROLL};
    static constexpr bool AHEAD = ${AHEAD}${AQ}${LAST};${AQ_ACT}
    static constexpr int GROUP_M = 1, WARPS_M = 1, WARPS_N = 1;   /* gemm_tile.cuh's tiles */
};
${CHAIN_CFG}extern "C" __global__ void __launch_bounds__(${BOUNDS}) ${NAME}(const ${ARGS} args)
{
    mt::${ENTRY}<${NAME}_cfg${CHAIN_ARG}>(args);
}
]], { NAME = name, ELEM = ELEM[p.dtype], QUANT = QUANT[p.quant], FORMAT = FORMAT[p.format],
      EPI = EPI[p.epilogue], BM = p.BLOCK_M, BN = p.BLOCK_N, WARPS = p.WARPS, UNROLL = p.UNROLL,
      AHEAD = p.AHEAD == 1 and "true" or "false",
      -- Only where set, so that the other kernels' sources stay as they were.
      AQ = p.AQUANT ~= "step" and ", AQ_CTA = true" or "",
      AQ_ACT = AQ_ACT[p.AQUANT] and ("\n    static constexpr int AQ_ACT = " .. AQ_ACT[p.AQUANT] .. ";") or "",
      LAST = (p.epilogue == "lastsum" and ", LAST_SUM = true" or "") ..
             (p.OQUANT == "last" and ", LAST_QUANT = true" or ""),
      OWN_QUANT = ((p.AQUANT ~= "step" or p.OQUANT ~= "step") and '#include "grouped_gemv_own_quant.cuh"\n' or "") ..
                  (chain and '#include "grouped_gemv_chain.cuh"\n' or ""),
      BOUNDS = s.threads .. (p.SM_WARPS > 0 and (", " .. p.SM_WARPS // p.WARPS) or ""),
      ARGS = chain and "mt_gemv_chain_args" or p.BLOCK_M == 1 and "mt_gemv_slot_args" or "mt_gemm_args",
      ENTRY = chain and "grouped_gemv_chain"
              or p.epilogue == "sum" and "grouped_gemv_token_sums"
              or p.BLOCK_M == 1 and "grouped_gemv_slots" or "grouped_gemv",
      -- The chained GEMM2's tile: "lastsum" of CHAIN weight rows, whose A
      -- rows other CTAs of the launch write (CHAINED).
      CHAIN_CFG = chain and mt.subst([[
struct ${NAME}_cfg2 {
    using T = ${ELEM};
    static constexpr int QUANT = ${QUANT}, FORMAT = ${FORMAT}, EPI = 0;
    static constexpr int BM = 1, BN = ${BN}, WARPS = ${WARPS}, UNROLL = ${UNROLL};
    static constexpr bool AHEAD = ${AHEAD}, LAST_SUM = true, CHAINED = true;
    static constexpr int GROUP_M = 1, WARPS_M = 1, WARPS_N = 1;
};
]], { NAME = name, ELEM = ELEM[p.dtype], QUANT = QUANT[p.quant], FORMAT = FORMAT[p.format],
      BN = p.CHAIN, WARPS = p.WARPS, UNROLL = p.UNROLL, AHEAD = p.AHEAD == 1 and "true" or "false" })
        or "",
      CHAIN_ARG = chain and (", " .. name .. "_cfg2") or "" })
  end,
}
