-- grouped_gemm_sm90: the experts' grouped GEMMs on Hopper's warpgroup MMA
-- (wgmma.mma_async, HGMMA/QGMMA in SASS), sm_90a only. Same kernel argument
-- (mt_gemm_args), same role (gemm1 or gemm2) and the same parameter names as
-- grouped_gemm, so the tuner and the runtime treat both families alike (see
-- mt_gemm_families). Operands staged in shared memory in the 128-byte
-- swizzled layout the MMA reads, by cp.async row copies (the standard
-- format's gathered token rows need them; the weight tiles too, or with
-- BLOAD=tma by the tensor memory accelerator from a descriptor the launcher
-- encodes), STAGES deep, one MMA group in flight. PIPE: "sync" (every thread
-- copies and computes, a CTA barrier per K tile), "ws" (a copying warpgroup
-- and computing warpgroups handing stages over on mbarriers) or "persist"
-- ("ws" in a grid of as many CTAs as the GPU holds at once, each walking the
-- output tiles, the copies of the next tile overlapping the epilogue of the
-- last; the runtime caps the grid of a variant with this value,
-- runtime/moe_launch.c) or "pingpong" ("persist" with two computing
-- warpgroups that take the CTA's output tiles in turn, each a whole 64-row
-- tile: one's epilogue runs while the other's MMAs do; BLOCK_M 64, or
-- swapped BLOCK_N 64; device code of its own, grouped_gemm_sm90_pingpong.cuh, so that the
-- other pipelines' kernels are generated as before and tuned databases stay
-- current, `moetune db refresh`).
-- SWAP (version 7): "no": one computing warpgroup per 64 token rows, the
-- weight rows are the MMA's N (BLOCK_N of them). "yes": the operands trade
-- places: one computing warpgroup per 64 weight rows (BLOCK_N a multiple of
-- 64), the tile's BLOCK_M token rows (16, 32, 64 or 128) are the MMA's N. A few
-- tokens per expert then cost no 64-row padding of the MMA, and the weights
-- stream through the same TMA pipeline ("ws", "persist", and "pingpong" with
-- BLOCK_N 64 and up to 64 token rows). Device
-- code: grouped_gemm_sm90.cuh; the wgmma call with its N/2 (or N/4...)
-- accumulator operands is written here, per tile width and operand type.

local ELEM = { bf16 = "mt::bf16", fp16 = "mt::f16" }
-- "sum" stores like "store" (EPI 0) and declares SUM_TOPK: GEMM2 adds its
-- rows into their tokens' fp32 rows (gemm_tile.cuh write_tile).
local EPI = { store = 0, silu = 1, gelu = 2, sum = 0 }
local FORMAT = { standard = 0, batched = 1 }
local QUANT = { none = 0, ["fp8-tensor"] = 1, ["fp8-token"] = 2, ["fp8-block"] = 3,
                ["int8-tensor"] = 4, ["int8-token"] = 5, ["int8-block"] = 6 }
local QUANTS = { "none", "fp8-tensor", "fp8-token", "fp8-block", "int8-tensor", "int8-token",
                 "int8-block" }

local function eight_bit(quant) return QUANT[quant] >= 1 end
local function block_scaled(quant) return quant == "fp8-block" or quant == "int8-block" end

local PIPE = { sync = 0, ws = 1, persist = 2, pingpong = 3 }
local BLOAD = { cp = 0, tma = 1 }
local ALOAD = { cp = 0, tma = 1 }

local function swapped(p) return p.SWAP == "yes" end

local function shape(p)
  local s = {}
  -- The MMA's 64-row side (token rows, or weight rows when swapped) and its
  -- N (the other side).
  s.mma_m = swapped(p) and p.BLOCK_N or p.BLOCK_M
  s.mma_n = swapped(p) and p.BLOCK_M or p.BLOCK_N
  -- 4 warps per 64 rows compute ("pingpong": two such groups, one tile
  -- each); every pipeline but "sync" adds a copying warpgroup.
  s.groups = p.PIPE == "pingpong" and 2 or 1
  s.threads = s.mma_m * 2 * s.groups + (p.PIPE ~= "sync" and 128 or 0)
  s.row_bytes = p.BLOCK_K * (eight_bit(p.quant) and 1 or 2)
  local pipeline = p.STAGES * (p.BLOCK_M + p.BLOCK_N) * s.row_bytes
  -- Block modes: each stage also carries its K block's scales, a float per
  -- token row and per 8 tile columns, in 16-byte units (sm90_shape).
  if block_scaled(p.quant) then
    pipeline = pipeline + p.STAGES * ((p.BLOCK_M + p.BLOCK_N // 8) * 4 + 15) // 16 * 16
  end
  -- The fp32 epilogue tile: the whole tile, or EPI_COLS columns of it at a
  -- time (a buffer of 64 rows per computing warpgroup); rows 8 floats past
  -- the width (epi_pitch, gemm_tile.cuh).
  local epilogue = p.BLOCK_M * ((p.EPI_COLS > 0 and p.EPI_COLS or p.BLOCK_N) + 8) * 4
  -- + alignment of the swizzled tiles + two mbarriers per stage + the row
  -- tables (A offset, output row, router weight: 20 bytes a row). "persist"
  -- gives the epilogue tile buffers of its own, and has two sets of output
  -- rows with two mbarriers each.
  if p.PIPE == "persist" then
    s.smem = pipeline + epilogue + 1024 + 16 * p.STAGES + 32 + 32 * p.BLOCK_M
  elseif p.PIPE == "pingpong" then
    -- An epilogue tile per group; four row sets (two per group), each with
    -- two mbarriers, BLOCK_M output rows and weights (12 bytes a row) and
    -- the tile's coordinates (32 bytes); an A row table (8 bytes a row) and
    -- a turn mbarrier per copying half and per group.
    s.smem = pipeline + 2 * epilogue + 1024 + 16 * p.STAGES + 4 * 16 + 4 * 8 + 4 * 32
             + (2 * 8 + 4 * 12) * p.BLOCK_M
  else
    s.smem = math.max(pipeline, epilogue) + 1024 + 16 * p.STAGES + 20 * p.BLOCK_M
  end
  -- fp32 (or int32) accumulators per thread; block modes keep a second set
  -- (the scaled sum).
  s.acc = s.mma_n // 2 * (block_scaled(p.quant) and 2 or 1)
  return s
end

-- The wgmma instruction for the point, as an inline-asm wrapper the kernel
-- calls once per K step: D(64 x n) += A(64 x k) * B(n x k)^T, A and B
-- K-major in shared memory (descriptors), D in this thread's registers.
local function mma_wrapper(p)
  local n = shape(p).mma_n
  local regs = n // 2
  local int = p.quant:sub(1, 4) == "int8"
  local op
  if p.quant == "none" then
    local t = p.dtype == "bf16" and "bf16" or "f16"
    op = string.format("wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s", n, t, t)
  elseif int then
    op = string.format("wgmma.mma_async.sync.aligned.m64n%dk32.s32.s8.s8", n)
  else
    op = string.format("wgmma.mma_async.sync.aligned.m64n%dk32.f32.e4m3.e4m3", n)
  end
  local dlist, cons = {}, {}
  for i = 0, regs - 1 do
    dlist[#dlist + 1] = "%" .. i
    cons[#cons + 1] = string.format('"+%s"(d[0][%d][%d])', int and "r" or "f", i // 4, i % 4)
  end
  -- scale-d is a predicate from the last operand: 1 adds the product to
  -- the accumulators, 0 overwrites them with it (the block modes' first MMA
  -- of a K tile: their fold leaves the last K tile's sums behind).
  local tail = (p.quant == "none") and "p, 1, 1, 0, 0" or (int and "p" or "p, 1, 1")
  local asm = string.format(
    '"{\\n.reg .pred p;\\nsetp.ne.b32 p, %%%d, 0;\\n%s {%s}, %%%d, %%%d, %s;\\n}\\n"',
    regs + 2, op, table.concat(dlist, ","), regs, regs + 1, tail)
  local acc = int and "int" or "float"
  local lines = {}
  for i = 1, #cons, 8 do
    lines[#lines + 1] = table.concat(cons, ", ", i, math.min(i + 7, #cons))
  end
  return string.format([[
    static __device__ __forceinline__ void mma(%s (&d)[1][%d][4], uint64_t da, uint64_t db, int scale_d)
    {
        asm volatile(%s
            : %s
            : "l"(da), "l"(db), "r"(scale_d));
    }]], acc, n // 8, asm, table.concat(lines, ",\n              "))
end

local defaults = {}
-- Tile t over the settings d of its kind into the default set, unless
-- t.only (a set of quant modes) leaves quant q out.
local function add_default(d, t, q)
  if t.only and not t.only[q] then return end
  for k, v in pairs(t) do d[k] = v end
  d.only = nil
  defaults[#defaults + 1] = d
end
local ATMA_DEFAULT = { none = true, ["fp8-block"] = true }
local SPLIT_DEFAULT = { none = true, ["fp8-block"] = true, ["int8-block"] = true }
for _, q in ipairs(QUANTS) do
  local bk = eight_bit(q) and 128 or 64
  for _, t in ipairs({
      { BLOCK_M = 64,  BLOCK_N = 128, STAGES = 5, GROUP_M = 8, PIPE = "sync" },
      { BLOCK_M = 128, BLOCK_N = 128, STAGES = 4, GROUP_M = 8, PIPE = "sync" },
      -- The same with the weight tiles by TMA (thread 0 a stage): the
      -- other threads copy only the A rows (session 29).
      { BLOCK_M = 64,  BLOCK_N = 128, STAGES = 5, GROUP_M = 8, PIPE = "sync", BLOAD = "tma" },
      { BLOCK_M = 128, BLOCK_N = 128, STAGES = 4, GROUP_M = 8, PIPE = "sync", BLOAD = "tma" },
      { BLOCK_M = 64,  BLOCK_N = 128, STAGES = 6, GROUP_M = 8, PIPE = "ws" },
      { BLOCK_M = 128, BLOCK_N = 128, STAGES = 5, GROUP_M = 8, PIPE = "ws" },
      { BLOCK_M = 128, BLOCK_N = 256, STAGES = 4, GROUP_M = 8, PIPE = "ws" },
      { BLOCK_M = 128, BLOCK_N = 128, STAGES = 4, GROUP_M = 8, PIPE = "persist" },
      { BLOCK_M = 64,  BLOCK_N = 128, STAGES = 4, GROUP_M = 8, PIPE = "pingpong" },
      -- Persistent with the epilogue in column chunks: the widest tile,
      -- and 128 x 128 (the block modes' widest) a stage deeper than above.
      { BLOCK_M = 128, BLOCK_N = 256, STAGES = 4, GROUP_M = 8, PIPE = "persist", EPI_COLS = 32 },
      { BLOCK_M = 128, BLOCK_N = 128, STAGES = 5, GROUP_M = 8, PIPE = "persist", EPI_COLS = 64 },
      -- The widest one in CTA pairs sharing its weight tiles.
      { BLOCK_M = 128, BLOCK_N = 256, STAGES = 4, GROUP_M = 8, PIPE = "persist", EPI_COLS = 32, CLUSTER = 2 },
      -- A rows by TMA (ALOAD; in the standard format as GEMM2 behind the
      -- cp twin): the chunked and the pingpong pipeline, for 16-bit and
      -- fp8 block-scaled operands only, so that the set stays small.
      { BLOCK_M = 128, BLOCK_N = 256, STAGES = 4, GROUP_M = 8, PIPE = "persist", EPI_COLS = 32, ALOAD = "tma",
        only = ATMA_DEFAULT },
      { BLOCK_M = 64,  BLOCK_N = 128, STAGES = 4, GROUP_M = 8, PIPE = "pingpong", ALOAD = "tma",
        only = ATMA_DEFAULT },
      -- The persistent tiles above with a warpgroup of padding rows
      -- skipping its MMAs (PAD_SKIP), so that the GPU tests' matrices
      -- prove that code too: 128 x 128 for 16-bit and fp8 block-scaled
      -- operands, 128 x 256 in column chunks for 16-bit ones (the 8-bit
      -- accumulators of that tile exceed the register budget).
      { BLOCK_M = 128, BLOCK_N = 128, STAGES = 4, GROUP_M = 8, PIPE = "persist", PAD_SKIP = "yes",
        only = ATMA_DEFAULT },
      { BLOCK_M = 128, BLOCK_N = 256, STAGES = 4, GROUP_M = 8, PIPE = "persist", EPI_COLS = 32,
        PAD_SKIP = "yes", only = ATMA_DEFAULT } }) do
    local d = { quant = q, BLOCK_K = bk, FOLD = "wait", BLOAD = t.PIPE == "sync" and "cp" or "tma",
                SWAP = "no", EPI_COLS = t.EPI_COLS or 0, CLUSTER = t.CLUSTER or 1, ALOAD = t.ALOAD or "cp",
                SPLIT_K = 1, PAD_SKIP = "no", OQUANT = "step", TURNS = "no" }
    add_default(d, t, q)
  end
  -- Swapped tiles for a few tokens per expert: 64 or 128 weight rows deep
  -- in stages, 16 to 64 token rows; one split in two along K, for the
  -- 16-bit and block-scaled modes. (With per-tensor or per-token scales
  -- the GPU test's one-token shape quantizes a single intermediate row,
  -- and a change of summation order alone moves its error across the
  -- 3e-2 tolerance: fp8-tensor 2.81e-2 on every unsplit tile there, 5.4e-3
  -- split; fp8-token 2.3e-3 unsplit, 3.18e-2 split. docs/PERFORMANCE.md,
  -- session 22.) The 16- and 32-row ws tiles, the untuned defaults on
  -- sm_90a below 24 rows per expert (common/defaults.c), take 4 stages:
  -- 75 KB of shared memory (16 rows, three CTAs an SM) or 84 KB (32 rows,
  -- two), where at 8 stages (149-150 KB) one CTA held an SM and the
  -- defaults of DeepSeek-V3 fp8 (few CTAs in GEMM1, K = 256 in GEMM2) ran
  -- slower than the mma.sync ones on an H100 (docs/PERFORMANCE.md, session
  -- 38).
  for _, t in ipairs({
      { BLOCK_M = 16, BLOCK_N = 128, STAGES = 4, PIPE = "ws" },
      { BLOCK_M = 16, BLOCK_N = 128, STAGES = 6, PIPE = "ws", SPLIT_K = 2, only = SPLIT_DEFAULT },
      { BLOCK_M = 32, BLOCK_N = 128, STAGES = 4, PIPE = "ws" },
      { BLOCK_M = 64, BLOCK_N = 128, STAGES = 6, PIPE = "ws" },
      { BLOCK_M = 16, BLOCK_N = 64,  STAGES = 8, PIPE = "persist" },
      { BLOCK_M = 32, BLOCK_N = 128, STAGES = 6, PIPE = "persist" } }) do
    local d = { quant = q, BLOCK_K = bk, FOLD = "wait", BLOAD = "tma", SWAP = "yes", GROUP_M = 1,
                EPI_COLS = 0, CLUSTER = 1, ALOAD = "cp", SPLIT_K = 1, PAD_SKIP = "no", OQUANT = "step", TURNS = "no" }
    add_default(d, t, q)
  end
end
-- GEMM1 tiles that quantize their activated output for GEMM2 (OQUANT
-- "last"), block modes: the ws, persist, chunked persist and pingpong
-- pipelines' 128-column tiles, bf16 with silu, so that the GPU tests prove
-- each one's writers and counters, and the tuner has them beside their
-- step-fed twins.
for _, q in ipairs({ "fp8-block", "int8-block" }) do
  for _, t in ipairs({
      { BLOCK_M = 128, BLOCK_N = 128, STAGES = 5, GROUP_M = 8, PIPE = "ws" },
      { BLOCK_M = 128, BLOCK_N = 128, STAGES = 4, GROUP_M = 8, PIPE = "persist" },
      { BLOCK_M = 128, BLOCK_N = 128, STAGES = 5, GROUP_M = 8, PIPE = "persist", EPI_COLS = 64 },
      { BLOCK_M = 64,  BLOCK_N = 128, STAGES = 4, GROUP_M = 8, PIPE = "pingpong" } }) do
    local d = { dtype = "bf16", epilogue = "silu", quant = q, BLOCK_K = 128, FOLD = "wait", BLOAD = "tma",
                SWAP = "no", EPI_COLS = 0, CLUSTER = 1, ALOAD = "cp", SPLIT_K = 1, PAD_SKIP = "no",
                OQUANT = "last", TURNS = "no" }
    add_default(d, t, q)
  end
end
-- MMA turns (TURNS yes), block modes: the ws tile and the chunked persist
-- tile with PAD_SKIP (the fp8 problems' GEMM1 at M = 4096), and that tile
-- with its A rows by TMA (their GEMM2), so that the GPU tests prove the
-- turns in each loop that takes them and in a warpgroup that skips its
-- MMAs, and the tuner has them beside their twins.
for _, q in ipairs({ "fp8-block", "int8-block" }) do
  for _, t in ipairs({
      { PIPE = "ws", STAGES = 5, EPI_COLS = 0, PAD_SKIP = "no", ALOAD = "cp" },
      { PIPE = "persist", STAGES = 4, EPI_COLS = 64, PAD_SKIP = "yes", ALOAD = "cp" },
      { PIPE = "persist", STAGES = 4, EPI_COLS = 64, PAD_SKIP = "yes", ALOAD = "tma" } }) do
    local d = { quant = q, BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 128, GROUP_M = 8, FOLD = "wait", BLOAD = "tma",
                SWAP = "no", CLUSTER = 1, SPLIT_K = 1, OQUANT = "step", TURNS = "yes" }
    add_default(d, t, q)
  end
end
-- Stages of two 128-byte panels (BLOCK_K 128 of 16-bit values), so that
-- the GPU tests' matrices prove them in each way a stage comes in: the
-- swapped decode tile (weights by TMA, A rows by cp.async), the pipeline
-- whose every thread copies (weights by cp.async, held sources), A rows
-- by TMA (with its A-by-cp.async twin, which a standard-format GEMM1
-- takes in its place), and CTA pairs multicasting their weight boxes.
-- Three stages each, which no other default tile of this family has, so
-- that a test can pick these out by name (_s3_p); the untuned default
-- rule takes one panel (common/defaults.c).
for _, t in ipairs({
    { BLOCK_M = 16,  BLOCK_N = 128, GROUP_M = 1, PIPE = "ws", SWAP = "yes" },
    { BLOCK_M = 64,  BLOCK_N = 128, GROUP_M = 8, PIPE = "sync", BLOAD = "cp" },
    { BLOCK_M = 64,  BLOCK_N = 128, GROUP_M = 8, PIPE = "pingpong" },
    { BLOCK_M = 64,  BLOCK_N = 128, GROUP_M = 8, PIPE = "pingpong", ALOAD = "tma" },
    { BLOCK_M = 128, BLOCK_N = 128, GROUP_M = 8, PIPE = "persist", EPI_COLS = 32, CLUSTER = 2 } }) do
  local d = { quant = "none", BLOCK_K = 128, STAGES = 3, FOLD = "wait", BLOAD = "tma", SWAP = "no",
              EPI_COLS = 0, CLUSTER = 1, ALOAD = "cp", SPLIT_K = 1, PAD_SKIP = "no", OQUANT = "step", TURNS = "no" }
  add_default(d, t, "none")
end

return {
  family = "grouped_gemm_sm90",
  version = 7,
  doc = "grouped GEMM of the MoE experts on warpgroup MMA (sm_90a), cp.async swizzled pipeline",
  archs = { "sm_90a" },
  params = {
    { name = "dtype",    abbrev = "",  values = { "bf16", "fp16" } },
    { name = "quant",    abbrev = "",  values = QUANTS },
    { name = "format",   abbrev = "",  values = { "standard", "batched" } },
    -- "sum" (GEMM2 of the standard format): the topk sum in the epilogue,
    -- by fp32 reductions into the output rows (runtime/moe_launch.c).
    { name = "epilogue", abbrev = "",  values = { "store", "silu", "gelu", "sum" } },
    -- Token rows of a tile (with SWAP "no", 64 per computing warpgroup).
    { name = "BLOCK_M",  abbrev = "m", values = { 16, 32, 64, 128 } },
    { name = "BLOCK_N",  abbrev = "n", values = { 64, 128, 192, 256 } },
    { name = "BLOCK_K",  abbrev = "k", values = { 64, 128 } },
    { name = "GROUP_M",  abbrev = "g", values = { 1, 8 } },
    { name = "STAGES",   abbrev = "s", values = { 3, 4, 5, 6, 8, 10, 12 } },
    -- "pingpong" was added to version 7 without a new version: every other
    -- variant is generated as before.
    { name = "PIPE",     abbrev = "p", values = { "sync", "ws", "persist", "pingpong" } },
    -- Block modes fold a K tile's sums (scaled) once its MMAs are done.
    -- "pingpong" (the next tile's MMAs into a second accumulator set
    -- meanwhile) was removed in version 4: ptxas serialized its warpgroup
    -- MMAs (grouped_gemm_sm90.cuh). The one value stays in the names, so
    -- that the kernels of tuned databases keep theirs.
    { name = "FOLD",     abbrev = "f", values = { "wait" } },
    -- How the weight tiles come in: cp.async row copies by the copying
    -- threads, or TMA bulk copies (one thread, completing on the stage's
    -- mbarrier). Version 6; "sync" with "tma" since session 29.
    { name = "BLOAD",    abbrev = "b", values = { "cp", "tma" } },
    -- Which operand is the MMA's 64-row side (file comment). Version 7;
    -- "no" stays out of the names, which are those of version 6.
    { name = "SWAP",     abbrev = "sw", values = { "no", "yes" }, omit_in_name = "no",
      only_if = function(p)
        if p.PIPE == "sync" then
          return false, "swapped operands need a copying warpgroup (PIPE ws, persist or pingpong)"
        elseif p.BLOCK_N % 64 ~= 0 then
          return false, "swapped: BLOCK_N is not whole warpgroups of 64 weight rows"
        elseif p.PIPE == "pingpong" and p.BLOCK_N ~= 64 then
          return false, "pingpong swapped: each computing warpgroup takes a whole tile of 64 weight rows"
        elseif p.PIPE == "pingpong" and p.BLOCK_M > 64 then
          return false, "pingpong swapped: 16 to 64 token rows a tile (grouped_gemm_sm90_pingpong.cuh)"
        end
        return true
      end },
    -- "persist": the epilogue in chunks of this many tile columns, 0 the
    -- whole tile at once (grouped_gemm_sm90_chunked.cuh). A chunk's smaller
    -- staging buffer lets wide tiles run persistent: 128 x 256 with four
    -- stages. Added to version 7: 0 stays out of the names.
    { name = "EPI_COLS", abbrev = "e",  values = { 0, 32, 64 }, omit_in_name = 0,
      only_if = function(p)
        if swapped(p) then return false, "an epilogue in column chunks is for unswapped tiles" end
        if p.PIPE ~= "persist" then return false, "an epilogue in column chunks is for PIPE persist" end
        return true
      end },
    -- "persist" in column chunks: CTAs in pairs (a cluster of 2) taking two
    -- row blocks of one column block, the weight tile multicast into both
    -- by TMA (grouped_gemm_sm90_chunked.cuh). Added to version 7: 1 stays
    -- out of the names. Correct, and level with unpaired tiles on the H200
    -- (docs/PERFORMANCE.md, session 18).
    { name = "CLUSTER",  abbrev = "c",  values = { 1, 2 }, omit_in_name = 1,
      only_if = function(p)
        if swapped(p) then return false, "CTA pairs are for unswapped tiles" end
        if p.EPI_COLS == 0 or p.BLOAD ~= "tma" then
          return false, "CTA pairs are for PIPE persist with EPI_COLS and TMA weight loads"
        end
        -- A pair takes consecutive tiles of the raster: with GROUP_M 1 those
        -- are column blocks of one row block, which share no weights.
        if p.GROUP_M % 2 ~= 0 then return false, "CTA pairs need an even GROUP_M (row blocks in pairs)" end
        return true
      end },
    -- How the A rows come in: cp.async row copies by the copying threads
    -- (any layout: the standard format's gathered token rows), or one TMA
    -- box of the tile's rows a stage, for rows laid out per expert: the
    -- batched format, or GEMM2 of the standard format reading GEMM1's
    -- output in the sorted order (the runtime lays the intermediate out so
    -- for such a GEMM2, runtime/moe_launch.c; a standard-format GEMM1 with
    -- it is refused). Added to version 7: "cp" stays out of the names.
    { name = "ALOAD",    abbrev = "a",  values = { "cp", "tma" }, omit_in_name = "cp",
      only_if = function(p)
        if p.PIPE == "sync" then
          return false, "TMA row loads need a copying warpgroup (PIPE ws, persist or pingpong)"
        elseif p.CLUSTER > 1 then
          return false, "CTA pairs copy their A rows by cp.async"
        elseif swapped(p) then
          -- A 16-row swapped "ws" tile with its rows by TMA gave wrong token
          -- rows now and then on the H200 (batched format, M = 4096, in three
          -- device calls of session 19; not in the fourth); the cause is not
          -- known, so swapped tiles keep the cp.async row copies.
          return false, "swapped: A rows by TMA not offered (wrong rows seen, cause unknown)"
        end
        return true
      end },
    -- Split-K for the swapped "ws" decode tiles: SPLIT_K CTAs per output
    -- tile, each streaming a slice of K; the last to finish adds the
    -- slices in split order (bit-for-bit repeatable) and writes the tile.
    -- A few tokens per expert leave too few tiles to spread the weight
    -- stream evenly over the SMs (Qwen3 M = 8: 300 tiles of 16 x 256 for
    -- 132 SMs); slices make the units of work smaller. Added to version 7:
    -- 1 stays out of the names.
    { name = "SPLIT_K",  abbrev = "sk", values = { 1, 2, 4 }, omit_in_name = 1,
      only_if = function(p)
        if not (swapped(p) and p.PIPE == "ws") then
          return false, "split-K only for swapped tiles of PIPE ws (decode)"
        elseif p.epilogue == "sum" then
          return false, "split-K tiles store their rows (the topk sum adds them in no fixed order)"
        end
        return true
      end },
    -- "persist" with two computing warpgroups (128 token rows, unswapped):
    -- "yes", a warpgroup whose 64 rows are all padding (the last row block
    -- of an expert) skips its MMAs, asked of the tile's output-row table
    -- before its first stage; "no", it computes them and the table is
    -- waited for at the epilogue. Faster for some problems and slower for
    -- others on an H100 (docs/PERFORMANCE.md, sessions 35 and 37), so the
    -- tuner chooses. Added to version 7: "no" stays out of the names.
    { name = "PAD_SKIP", abbrev = "ps", values = { "no", "yes" }, omit_in_name = "no",
      only_if = function(p)
        if p.PIPE ~= "persist" or swapped(p) or p.BLOCK_M ~= 128 then
          return false, "PAD_SKIP: the persistent tiles of two computing warpgroups (128 token rows)"
        end
        return true
      end },
    -- Block modes with two computing warpgroups on one tile: "yes", they
    -- issue each K tile's MMAs in turns, warpgroup 0 first, so that one
    -- folds its sums while the tensor cores run the other's MMAs (mma_turns,
    -- grouped_gemm_sm90.cuh); "no", both at once. Added to version 7: "no"
    -- stays out of the names.
    { name = "TURNS",    abbrev = "tn", values = { "no", "yes" }, omit_in_name = "no",
      only_if = function(p)
        if not block_scaled(p.quant) or swapped(p) or p.BLOCK_M ~= 128
           or (p.PIPE ~= "ws" and p.PIPE ~= "persist") then
          return false, "TURNS: block modes, two computing warpgroups on one tile (128 token rows, PIPE ws or persist)"
        end
        return true
      end },
    -- GEMM1 with the activation fused, block modes: "last", the last tile
    -- of each row block's 128-column group to store its activated rows
    -- reads the group back from L2 and quantizes it for GEMM2, as the act
    -- step would, and the pipeline has no act step
    -- (grouped_gemm_sm90_out_quant.cuh; the kernel argument is then
    -- mt_gemv_slot_args, whose act_q and act_scale say where). Added to
    -- version 7: "step" stays out of the names.
    { name = "OQUANT",   abbrev = "oq", values = { "step", "last" }, omit_in_name = "step",
      only_if = function(p)
        if EPI[p.epilogue] == 0 or not block_scaled(p.quant) then
          return false, "OQUANT last: GEMM1 of the block modes with the activation fused"
        elseif swapped(p) or p.PIPE == "sync" or p.CLUSTER > 1 or p.SPLIT_K > 1 then
          return false, "OQUANT last: unswapped tiles of PIPE ws, persist or pingpong, unpaired, unsplit"
        elseif 128 % (p.BLOCK_N // 2) ~= 0 then
          return false, "OQUANT last: a tile's BLOCK_N / 2 activated columns must divide a 128-column group"
        end
        return true
      end },
  },
  default_set = defaults,
  valid = function(p, target)
    if p.epilogue == "sum" and p.format ~= "standard" then
      return false, "the topk sum is GEMM2's of the standard format"
    end
    -- (main prunes the batched pingpong tiles with A rows by TMA, which gave
    -- wrong rows now and then in session 27; this branch offers them again
    -- so that gpu_moe checks them against the stage barrier fix.)
    -- (Where a parameter may leave its first value is its only_if, above:
    -- the swapped tiles' rules are SWAP's. Swapped block-scaled tiles in
    -- the persistent loop were pruned from f4f792e on: ptxas serialized
    -- their warpgroup MMAs, C7520. The templates since 20e8318 compile them
    -- with no performance note, test_sm90_swapped_block_persist_compiles.)
    if p.EPI_COLS > 0 and p.BLOCK_N <= p.EPI_COLS then
      return false, "EPI_COLS: the chunk is the whole tile (EPI_COLS 0)"
    end
    if not swapped(p) then
      if p.PIPE == "pingpong" and p.BLOCK_M ~= 64 then
        return false, "pingpong: each computing warpgroup takes a whole tile of 64 token rows"
      elseif p.BLOCK_M < 64 then
        return false, "BLOCK_M under 64 rows needs swapped operands"
      elseif p.STAGES > 6 then
        return false, "more than 6 stages only for swapped operands"
      end
    end
    local s = shape(p)
    -- One 128-byte swizzle row of K per stage: 64 16-bit or 128 8-bit
    -- values; or for 16-bit operands two (BLOCK_K 128), panels one after
    -- the other, so that a stage reads 256 bytes of each weight row (the
    -- 8-bit modes' K tile is their scale block, or their one panel).
    if s.row_bytes ~= 128 and not (s.row_bytes == 256 and not eight_bit(p.quant)) then
      return false, "BLOCK_K is not one 128-byte swizzle row (or two, of 16-bit values)"
    end
    -- One consumer warpgroup gets up to 255 registers a thread, two 216.
    if s.acc > 128 then return false, "accumulators exceed the register budget" end
    -- Swapped tiles take no registers from the copiers (no setmaxnreg, but
    -- in "pingpong", which moves them as for unswapped tiles): every thread
    -- has its share of the register file.
    if swapped(p) and (s.acc + 48) * s.threads > 65536 then
      return false, "swapped: accumulators exceed the register budget"
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
    -- Pipelines with device code of their own: their header after the
    -- family's, and their entry point. The include lines are written out
    -- whole so that the family's template hash (gen/render.c), which
    -- follows the include lines it finds in this file, covers these
    -- headers too.
    local own = p.PIPE == "pingpong" and "grouped_gemm_sm90_pingpong"
                or p.EPI_COLS > 0 and "grouped_gemm_sm90_chunked" or nil
    local own_include = {
      grouped_gemm_sm90_pingpong = '#include "grouped_gemm_sm90_pingpong.cuh"\n',
      grouped_gemm_sm90_chunked = '#include "grouped_gemm_sm90_chunked.cuh"\n',
    }
    local last_quant = p.OQUANT == "last"
    local out_quant_include = '#include "grouped_gemm_sm90_out_quant.cuh"\n'
    return mt.subst([[
#include "grouped_gemm_sm90.cuh"
${OWN_INCLUDE}MT_PDL_AWARE   /* keeps the launch protocol of mt_device.cuh */
struct ${NAME}_cfg {
    using T = ${ELEM};
    static constexpr int QUANT = ${QUANT}, FORMAT = ${FORMAT}, EPI = ${EPI};
    static constexpr int BM = ${BM}, BN = ${BN}, BK = ${BK}, GROUP_M = ${GROUP_M}, STAGES = ${STAGES};
    static constexpr int PIPE = ${PIPE}, BLOAD = ${BLOAD}, ALOAD = ${ALOAD};
    static constexpr bool SWAP = ${SWAP};
${EPI_COLS}${CLUSTER}${SPLIT_K}${SUM_TOPK}${PAD_SKIP}${LAST_QUANT}${TURNS}    static constexpr int WARPS_M = ${MMA_M} / 16, WARPS_N = 1;   /* wgmma D layout, gemm_tile.cuh */
${MMA}
};
extern "C" __global__ void __launch_bounds__(${THREADS}, 1) ${CLUSTER_DIMS}${NAME}(const __grid_constant__ ${ARGS} args)
{
    mt::${ENTRY}<${NAME}_cfg>(args${GEMM_ARGS});
}
]], { NAME = name, ELEM = ELEM[p.dtype], QUANT = QUANT[p.quant], FORMAT = FORMAT[p.format],
      EPI = EPI[p.epilogue], BM = p.BLOCK_M, BN = p.BLOCK_N, BK = p.BLOCK_K, GROUP_M = p.GROUP_M,
      STAGES = p.STAGES, PIPE = PIPE[p.PIPE], BLOAD = BLOAD[p.BLOAD], ALOAD = ALOAD[p.ALOAD], SWAP = swapped(p) and "true" or "false",
      MMA_M = s.mma_m, THREADS = s.threads, MMA = mma_wrapper(p),
      -- After the family's header, so that every variant's source starts
      -- the same (libmoetune stores that prefix once, rt_defaults.h).
      OWN_INCLUDE = (own and own_include[own] or "") .. (last_quant and out_quant_include or ""),
      EPI_COLS = p.EPI_COLS > 0 and string.format("    static constexpr int EPI_COLS = %d;\n", p.EPI_COLS)
                 or "",
      CLUSTER = p.CLUSTER > 1 and string.format("    static constexpr int CLUSTER = %d;\n", p.CLUSTER) or "",
      SPLIT_K = p.SPLIT_K > 1 and string.format("    static constexpr int SPLIT_K = %d;\n", p.SPLIT_K) or "",
      SUM_TOPK = p.epilogue == "sum" and "    static constexpr int SUM_TOPK = 1;\n" or "",
      -- An enumerator, not a static constexpr member, which NVRTC would
      -- emit into the image as a global of its own.
      PAD_SKIP = p.PAD_SKIP == "yes" and "    enum { PAD_SKIP = 1 };\n" or "",
      LAST_QUANT = last_quant and "    enum { LAST_QUANT = 1 };\n" or "",
      TURNS = p.TURNS == "yes" and "    enum { TURNS = 1 };\n" or "",
      ARGS = last_quant and "mt_gemv_slot_args" or "mt_gemm_args",
      GEMM_ARGS = last_quant and ".gemm" or "",
      CLUSTER_DIMS = p.CLUSTER > 1 and string.format("__cluster_dims__(%d, 1, 1) ", p.CLUSTER) or "",
      ENTRY = own or "grouped_gemm_sm90" })
  end,
}
