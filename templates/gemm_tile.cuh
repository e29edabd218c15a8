/*
 * What both grouped-GEMM main loops share (grouped_gemm.cuh on mma.sync,
 * grouped_gemm_sm90.cuh on warpgroup MMA): the quant traits, the tile a CTA
 * owns (expert, rows, weight columns), the accumulator fragment geometry,
 * the per-128-K block-scale folding and the epilogue.
 *
 * Accumulator fragments: warp (warp_m, warp_n) of a WARPS_M x WARPS_N grid
 * owns a WM x WN sub-tile as MT x NT fragments of 16 x 8 values; lane L
 * holds, in acc[i][j][h * 2 + c], row warp_m*WM + 16i + L/4 + 8h and column
 * warp_n*WN + 8j + 2(L%4) + c. That is the C layout of mma.sync m16n8, and
 * also the D layout of wgmma m64nN (warp w of a warpgroup holds rows 16w..
 * 16w+15 of the 64, NT = N/8): the sm90 kernel describes itself with
 * WARPS_M = BM/16, WARPS_N = 1 and reuses all of this.
 */
#pragma once
#include "mt_device.cuh"
#include "silu_steps.cuh"

namespace mt {

template <bool C, class X, class Y> struct pick { using type = X; };
template <class X, class Y> struct pick<false, X, Y> { using type = Y; };

/* QUANT is the mt_quant_mode value: 0 none, 1-3 fp8 tensor/token/block,
 * 4-6 int8 tensor/token/block, 7 w8a16, 8 w4a16. */
template <int QUANT> struct quant_traits {
    static constexpr bool W8A8 = QUANT >= 1 && QUANT <= 6;
    static constexpr bool INT8 = QUANT >= 4 && QUANT <= 6;
    static constexpr int GRAN = W8A8 ? (QUANT - 1) % 3 + 1 : 0;   /* 1 tensor, 2 token, 3 block */
    static constexpr bool WONLY = QUANT == 7 || QUANT == 8;
    static constexpr bool W4 = QUANT == 8;
    static constexpr int A_BITS = W8A8 ? 8 : 16;
    static constexpr int B_BITS = W8A8 || QUANT == 7 ? 8 : W4 ? 4 : 16;
    using Tag = typename pick<INT8, s8_tag, e4m3_tag>::type;
    using Acc = typename pick<INT8, int, float>::type;
};

/* The staged fp32 epilogue tile. Row r of a tile `cols` wide starts at
 * r * epi_pitch(cols) floats; within each aligned 8 columns the two 16-byte
 * halves trade places where (r ^ col / 32) is odd, and within each aligned
 * 16 columns the two 32-byte halves where r / 4 is odd (epi_at). With the
 * pitch 8 floats past the width (a multiple of 32), each 8-byte fragment
 * store of a warp (stage_fragments, stage_chunk: 16 lanes on 4 rows), each
 * 4-byte store of the swapped fragments (stage_tile: 8 columns of 4 rows)
 * and each 16-byte load of write_tile (8 lanes on 1, 2 or 4 rows) meets
 * every shared-memory bank once. The unpermuted tile with 4 floats of
 * padding took two passes for the fragment stores of every tile and for the
 * loads of most; without the 32-byte trade (session 21) the swapped stores
 * took two. docs/PERFORMANCE.md, sessions 21 and 22;
 * docs/measurements/2026-12-04-s21/epi-banks.py models all three. */
__host__ __device__ constexpr int epi_pitch(int cols) { return cols + 8; }
template <int LDC> __device__ __forceinline__ int epi_at(int r, int col)
{
    static_assert(LDC % 32 == 8, "a tile of whole 32-column groups, 8 floats of padding");
    /* col ^ 4 and col ^ 8 where the halves trade places, written as
     * additions: a thread's fragment columns then differ by constants, and
     * ptxas keeps no more registers than for the unpermuted tile (the XOR
     * form took a 64 x 192 tile from 122 to 128, a 64 x 256 one from 154 to
     * 168, and with the 32-byte trade too the 64 x 192 one to 167). */
    const int swap16 = (r ^ (col >> 5)) & 1, swap32 = (r >> 2) & 1;
    return r * LDC + col + swap16 * (4 - ((col & 4) << 1)) + swap32 * (8 - ((col & 8) << 1));
}
/* Columns col, col + 1 (col even) of row r: one 8-byte store. */
template <int LDC> __device__ __forceinline__ void epi_store2(float *sC, int r, int col, float v0, float v1)
{
    *reinterpret_cast<float2 *>(sC + epi_at<LDC>(r, col)) = make_float2(v0, v1);
}
/* Columns col .. col + 7 (col a multiple of 8) of row r: two 16-byte loads,
 * issued where they are written (volatile, for the compiler and in the PTX
 * for ptxas: write_tile loads a batch of vectors ahead of the stores that
 * use some of them, and each load would otherwise move down next to its
 * store, behind the test of the row, one shared-memory latency after the
 * other). */
template <int LDC> __device__ __forceinline__ void epi_load8(const float *sC, int r, int col, float (&v)[8])
{
#pragma unroll
    for (int h = 0; h < 2; h++)
        asm volatile("ld.volatile.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                     : "=f"(v[4 * h]), "=f"(v[4 * h + 1]), "=f"(v[4 * h + 2]), "=f"(v[4 * h + 3])
                     : "r"(smem_addr(sC + epi_at<LDC>(r, col + 4 * h))));
}

/* Fragment geometry and epilogue sizes of a Cfg (see the file comment). */
template <class Cfg> struct tile_shape {
    using Q = quant_traits<Cfg::QUANT>;
    static constexpr int THREADS = Cfg::WARPS_M * Cfg::WARPS_N * 32;
    static constexpr int WM = Cfg::BM / Cfg::WARPS_M;   /* warp tile rows */
    static constexpr int WN = Cfg::BN / Cfg::WARPS_N;   /* warp tile cols */
    static constexpr int MT = WM / 16, NT = WN / 8;     /* 16x8 fragments per warp */
    static constexpr int LDC = epi_pitch(Cfg::BN);      /* fp32 epilogue row */
    static constexpr bool FUSED = Cfg::EPI != 0;
    static constexpr int OUT_COLS = FUSED ? Cfg::BN / 2 : Cfg::BN;
    static constexpr bool BLOCK = Q::GRAN == 3;
    static constexpr int EPI_BYTES = Cfg::BM * LDC * 4;
};

/* Does Cfg add each row into its token's row of an fp32 C (the epilogue
 * "sum" of GEMM2, Cfg::SUM_TOPK declared) instead of storing it per slot? */
template <class C, class = void> struct sums_topk_of {
    static constexpr bool value = false;
};
template <class C> struct sums_topk_of<C, decltype(void(C::SUM_TOPK))> {
    static constexpr bool value = C::SUM_TOPK != 0;
};

/* Does Cfg's GEMM1 quantize its activated output for GEMM2 (OQUANT
 * "last": Cfg::LAST_QUANT declared), the last CTA of each 128-column group
 * of a row (grouped_gemv) or of a row block (grouped_gemm_sm90) doing it
 * once the others have stored theirs? */
template <class C> __device__ constexpr auto last_quants_of(int) -> decltype(bool(C::LAST_QUANT))
{
    return C::LAST_QUANT;
}
template <class C> __device__ constexpr bool last_quants_of(long) { return false; }
template <class C> __device__ constexpr bool last_quants() { return last_quants_of<C>(0); }

/* Which rows a tile covers, resolved once per CTA. */
struct tile_rows {
    int expert;
    int mb;
    int r0;        /* batched: first row of the tile within the expert */
    int count;     /* batched: rows of the expert */
};

template <class Cfg>
__device__ __forceinline__ bool tile_row(const mt_gemm_args &a, const tile_rows &t, int r,
                                         int64_t *arow, int64_t *crow, int *slot)
{
    if (Cfg::FORMAT == 0) {
        const int pos = t.mb * Cfg::BM + r;
        int s = a.sorted_ids[pos];
        if (s >= a.num_slots)
            return false;
        *slot = s;
        *arow = a.a_sorted ? pos : s / a.a_row_div;
        *crow = a.c_sorted ? pos : s;
        return true;
    }
    int rr = t.r0 + r;
    if (rr >= t.count)
        return false;
    *slot = -1;
    *arow = (int64_t)t.expert * a.max_tokens + rr;
    *crow = *arow;
    return true;
}

/* Weight row (= product column) of tile column c; false past the end. The
 * fused epilogue's tile holds gate rows in its first half, up rows after. */
template <class Cfg> __device__ __forceinline__ bool weight_row(const mt_gemm_args &a, int nb, int c, int *n)
{
    if (tile_shape<Cfg>::FUSED) {
        const int half = Cfg::BN / 2, nn = nb * half + c % half;
        *n = c < half ? nn : a.n_half + nn;
        return nn < a.n_half;
    }
    *n = nb * Cfg::BN + c;
    return *n < a.N;
}

/* The tile of CTA `pid`: GROUP_M row blocks share each column block, for L2
 * reuse of the weights. False when the tile has no rows (padding blocks,
 * experts not on this rank, rows past an expert's count). */
template <class Cfg> __device__ __forceinline__ int num_n_blocks(const mt_gemm_args &a)
{
    using S = tile_shape<Cfg>;
    const int out_limit = S::FUSED ? a.n_half : a.N;
    return (out_limit + S::OUT_COLS - 1) / S::OUT_COLS;
}

/* Tiles of the GEMM (padding tiles included): the grid of a kernel with a
 * CTA per tile, what a persistent kernel's CTAs share out. */
template <class Cfg> __device__ __forceinline__ int num_tiles(const mt_gemm_args &a)
{
    return a.num_m_blocks * num_n_blocks<Cfg>(a);
}

template <class Cfg>
__device__ __forceinline__ bool tile_of(const mt_gemm_args &a, int pid, tile_rows *t, int *nb)
{
    const int n_blocks = num_n_blocks<Cfg>(a);
    const int in_group = Cfg::GROUP_M * n_blocks;
    const int first_m = (pid / in_group) * Cfg::GROUP_M;
    const int gsize = min(a.num_m_blocks - first_m, Cfg::GROUP_M);
    t->mb = first_m + (pid % in_group) % gsize;
    *nb = (pid % in_group) / gsize;
    t->r0 = 0;
    t->count = 0;
    if (Cfg::FORMAT == 0) {
        if (t->mb * Cfg::BM >= *a.num_padded)
            return false;
        t->expert = a.block_expert[t->mb];
        return t->expert >= 0;
    }
    const int bpe = (a.max_tokens + Cfg::BM - 1) / Cfg::BM;
    t->expert = t->mb / bpe;
    t->r0 = (t->mb % bpe) * Cfg::BM;
    t->count = a.expert_num_tokens[t->expert];
    return t->r0 < t->count;
}

/* Block modes: where this thread's fragment rows and column groups find
 * their scales (-1: outside the problem, scale 0), and the fold of a
 * finished 128-wide K block into the fp32 sum. A fragment's 8 columns share
 * one weight scale: they start at a multiple of 8 of n (gate columns at
 * nb*BN/2, up columns at n_half + nb*BN/2, n_half a multiple of 16 for
 * 8-bit operands), so they never straddle a 128-wide block of n, and they
 * are all inside N or all past it. */
template <class Cfg> struct block_scales {
    using S = tile_shape<Cfg>;
    int64_t sa_off[S::MT][2];
    int32_t sw_off[S::NT];
    int kblocks;
    /* The scales of K block `next` (-1: none), loaded one fold ahead so that
     * a fold does not stall the main loop on a global load. */
    int next;
    float sa[S::MT][2], sw[S::NT];

    __device__ __forceinline__ void init(const mt_gemm_args &a, const tile_rows &t, int nb, int warp_m,
                                         int warp_n, int lane)
    {
        const int nblocks = (a.N + 127) / 128;
        kblocks = (a.K + 127) / 128;
#pragma unroll
        for (int i = 0; i < S::MT; i++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int64_t arow, crow;
                int slot;
                const int r = warp_m * S::WM + i * 16 + (lane >> 2) + h * 8;
                sa_off[i][h] = tile_row<Cfg>(a, t, r, &arow, &crow, &slot) ? arow * a.a_scale_ld : -1;
            }
#pragma unroll
        for (int j = 0; j < S::NT; j++) {
            int n;
            sw_off[j] = weight_row<Cfg>(a, nb, warp_n * S::WN + j * 8, &n)
                            ? (t.expert * nblocks + n / 128) * kblocks
                            : -1;
        }
        load(a, 0);
    }

    __device__ __forceinline__ void load(const mt_gemm_args &a, int kb)
    {
        next = kb < kblocks ? kb : -1;
        if (next < 0)
            return;
#pragma unroll
        for (int i = 0; i < S::MT; i++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                sa[i][h] = sa_off[i][h] >= 0 ? a.a_scale[sa_off[i][h] + kb] : 0.f;
#pragma unroll
        for (int j = 0; j < S::NT; j++)
            sw[j] = sw_off[j] >= 0 ? a.b_scale[sw_off[j] + kb] : 0.f;
    }

    /* facc += acc * a_scale * w_scale of K block kb; acc = 0. K blocks come
     * in increasing order; a split-K slice starts past block 0, so its first
     * fold loads its own scales. */
    template <class Acc>
    __device__ __forceinline__ void fold(const mt_gemm_args &a, int kb, Acc (&acc)[S::MT][S::NT][4],
                                         float (&facc)[S::MT][S::NT][4])
    {
        if (next != kb)
            load(a, kb);
#pragma unroll
        for (int j = 0; j < S::NT; j++)
#pragma unroll
            for (int i = 0; i < S::MT; i++)
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    facc[i][j][q] += (float)acc[i][j][q] * (sa[i][q >> 1] * sw[j]);
                    acc[i][j][q] = 0;
                }
        load(a, kb + 1);
    }
};

/* Split-K (decode tiles of both families): SPLIT_K CTAs share an output
 * tile, each summing a slice of K; the tile's last CTA to finish adds the
 * slices in split order (bit-for-bit repeatable) and writes the tile out.
 * split_of<Cfg> is Cfg::SPLIT_K, or 1 where Cfg declares none (the sm90
 * family declares it only for split tiles). */
template <class C, class = void> struct split_of {
    static constexpr int value = 1;
};
template <class C> struct split_of<C, decltype(void(C::SPLIT_K))> {
    static constexpr int value = C::SPLIT_K;
};

/* The K tiles [*kt0, *kt1) of slice `split` of k_tiles. Block modes round
 * the slice up to whole 128-wide K blocks (BK divides 128) so that no scale
 * block spans two slices. A slice past the end is empty. */
template <class Cfg>
__device__ __forceinline__ void split_slice(int k_tiles, int split, int *kt0, int *kt1)
{
    constexpr int SK = split_of<Cfg>::value;
    constexpr int UNIT = tile_shape<Cfg>::BLOCK ? 128 / Cfg::BK : 1;
    int per = (k_tiles + SK - 1) / SK;
    per = (per + UNIT - 1) / UNIT * UNIT;
    *kt0 = min(k_tiles, split * per);
    *kt1 = min(k_tiles, *kt0 + per);
}

/* A 32-bit accumulator as a word of a.partial: fp32 as is, int32 as its
 * raw bits, so that the sum of the slices stays exact. */
__device__ __forceinline__ float partial_word(float x) { return x; }
__device__ __forceinline__ float partial_word(int x) { return __int_as_float(x); }
__device__ __forceinline__ void add_partial(float &x, float w) { x += w; }
__device__ __forceinline__ void add_partial(int &x, float w) { x += __float_as_int(w); }

/* How the threads holding a tile's fragments meet: the whole CTA
 * (cta_barrier), named barrier `id` of N threads (numbered_barrier: a
 * computing warpgroup's own, 2 + its index, known at run time), or named
 * barrier ID of N threads, ID known at compile time (group_barrier: a
 * kernel whose copying warpgroup holds no fragments; ptxas makes the same
 * code of it as of the immediate ID). any(p): true on every thread if p is
 * on one. */
struct cta_barrier {
    static __device__ __forceinline__ void sync() { __syncthreads(); }
    static __device__ __forceinline__ bool any(bool p) { return __syncthreads_or(p); }
};
template <int N> struct numbered_barrier {
    int id;
    __device__ __forceinline__ void sync() const { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(N) : "memory"); }
    __device__ __forceinline__ bool any(bool p) const
    {
        int r;
        asm volatile("{\n.reg .pred p, q;\nsetp.ne.b32 p, %1, 0;\nbar.red.or.pred q, %2, %3, p;\n"
                     "selp.b32 %0, 1, 0, q;\n}\n"
                     : "=r"(r)
                     : "r"((int)p), "r"(id), "n"(N)
                     : "memory");
        return r != 0;
    }
};
template <int ID, int N> struct group_barrier {
    static __device__ __forceinline__ void sync() { numbered_barrier<N>{ID}.sync(); }
    static __device__ __forceinline__ bool any(bool p) { return numbered_barrier<N>{ID}.any(p); }
};

/* Count this CTA (or those of its threads that meet by bar, tid among
 * them) in at *count once their stores are visible GPU-wide. True on every
 * one of them for the arrival that is the `of`-th, which may then read
 * what the others stored (it re-arms the counter, to 0, when done). */
template <class Bar> __device__ __forceinline__ bool arrive_last(int32_t *count, int of, int tid, Bar bar = Bar{})
{
    __threadfence();   /* this thread's stores are visible GPU-wide ... */
    bar.sync();        /* ... and so are every thread's, before the count says so */
    int last = 0;
    if (tid == 0)
        last = atomicAdd(count, 1) == of - 1;
    if (!bar.any(last))
        return false;
    __threadfence();   /* read the others' stores only after seeing them all counted */
    return true;
}

/* Store this CTA's sums v (acc, or the block modes' facc) as partial
 * `split` of `tile` and count the CTA in. THREADS threads (tid of them)
 * hold v and meet by Bar. False for all but the last CTA of the tile; the
 * last one gets in v the sum of every partial, its own included, in split
 * order, and re-arms the counter. Partials are [tile][split][reg][thread]:
 * a CTA's stores and loads of one reg cover consecutive words, and a
 * slice is THREADS * MT * NT * 4 = BM * BN words in either family (the
 * runtime's partial_bytes). */
template <class Cfg, int THREADS, class Bar, class V, int MT, int NT>
__device__ __forceinline__ bool split_k_reduce(const mt_gemm_args &a, int tile, int split, int tid,
                                               V (&v)[MT][NT][4])
{
    constexpr int SK = split_of<Cfg>::value;
    constexpr int R = MT * NT * 4;   /* reg r is v[r / (NT*4)][r / 4 % NT][r % 4] */
    float *part = a.partial + (int64_t)tile * SK * R * THREADS + tid;
#pragma unroll
    for (int r = 0; r < R; r++)
        part[((int64_t)split * R + r) * THREADS] = partial_word(v[r / (NT * 4)][r / 4 % NT][r % 4]);
    if (!arrive_last<Bar>(&a.tile_count[tile], SK, tid))
        return false;
#pragma unroll
    for (int r = 0; r < R; r++) {
        V &x = v[r / (NT * 4)][r / 4 % NT][r % 4];
        x = 0;
#pragma unroll
        for (int s = 0; s < SK; s++)   /* through L2: other SMs wrote them */
            add_partial(x, __ldcg(part + ((int64_t)s * R + r) * THREADS));
    }
    if (tid == 0)
        a.tile_count[tile] = 0;
    return true;
}

/* The epilogue, in two halves so that a kernel whose copying threads hold
 * no accumulators can still help write: stage_fragments puts this thread's
 * fragments (tensor/token scales applied, or the block modes' folded sums)
 * into the fp32 tile sC (BM x LDC, S::EPI_BYTES of shared memory free of
 * pipeline data); after a barrier, write_tile applies the router weight per
 * row and the optional activation-and-mul and writes 16-byte vectors, its
 * rows dealt over `nthreads` threads. FACC is ignored unless S::BLOCK. */
template <class Cfg, class Acc, class FAcc>
__device__ __forceinline__ void stage_fragments(const mt_gemm_args &a, const tile_rows &t, int nb,
                                                int warp_m, int warp_n, int lane, const Acc &acc,
                                                const FAcc &facc, float *sC)
{
    using S = tile_shape<Cfg>;
    using Q = typename S::Q;
#pragma unroll
    for (int i = 0; i < S::MT; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = warp_m * S::WM + i * 16 + (lane >> 2) + h * 8;
            /* Tensor / token scales leave the registers with the values. */
            float sa = 1.f;
            if constexpr (Q::GRAN == 1) {
                sa = a.a_scale[0] * a.b_scale[t.expert];
            } else if constexpr (Q::GRAN == 2) {
                int64_t arow, crow;
                int slot;
                sa = tile_row<Cfg>(a, t, r, &arow, &crow, &slot) ? a.a_scale[arow] : 0.f;
            }
#pragma unroll
            for (int j = 0; j < S::NT; j++) {
                const int col = warp_n * S::WN + j * 8 + (lane & 3) * 2;
                float v[2];
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    if constexpr (S::BLOCK) {
                        v[c] = facc[i][j][h * 2 + c];
                    } else if constexpr (Q::GRAN == 2) {
                        int n;
                        const float sw = weight_row<Cfg>(a, nb, col + c, &n)
                                             ? a.b_scale[(int64_t)t.expert * a.N + n]
                                             : 0.f;
                        v[c] = (float)acc[i][j][h * 2 + c] * (sa * sw);
                    } else {
                        v[c] = (float)acc[i][j][h * 2 + c] * sa;
                    }
                }
                epi_store2<S::LDC>(sC, r, col, v[0], v[1]);
            }
        }
}

/* Where tile row r goes: the offset in C, in elements, of its output row
 * (of its token's fp32 row for the topk sum, sums_topk_of; false: none),
 * and the router weight it is scaled by. An offset, not a row index, so
 * that a table of them (fill_out_rows) leaves write_tile no multiplication
 * (and the topk sum no division) per 16-byte vector. */
template <class Cfg>
__device__ __forceinline__ bool out_row(const mt_gemm_args &a, const tile_rows &t, int r, int64_t *dst,
                                        float *w)
{
    int64_t arow, crow;
    int slot;
    if (!tile_row<Cfg>(a, t, r, &arow, &crow, &slot))
        return false;
    /* The topk sum's rows are slots (int32): a 32-bit division. */
    *dst = (sums_topk_of<Cfg>::value ? (int64_t)((int)crow / a.sum_topk) : crow) * a.ldc;
    *w = (a.row_weight && slot >= 0) ? a.row_weight[slot] : 1.0f;
    return true;
}

/* The output rows of a tile resolved once into shared memory (out_row's
 * offsets, dst -1: no row), by threads id of n, so that the epilogue reads
 * them without a chain of global loads per 16-byte vector. The caller
 * orders the fill before write_tile with a barrier. */
struct out_rows {
    static constexpr bool TABLE = true;
    int64_t *dst;
    float *w;
};
/* No table: write_tile resolves each row where it writes it (the kernels
 * whose tiles fill none). A type of its own, so that a kernel with a table
 * carries no code for the other case, and no test of the pointer per row. */
struct rows_here {
    static constexpr bool TABLE = false;
};
template <class Cfg>
__device__ __forceinline__ void fill_out_rows(const mt_gemm_args &a, const tile_rows &t, out_rows rows,
                                              int id, int n)
{
    for (int r = id; r < Cfg::BM; r += n)
        if (!out_row<Cfg>(a, t, r, &rows.dst[r], &rows.w[r]))
            rows.dst[r] = -1;
}

/* rows: the tile's output rows from fill_out_rows (out_rows), or rows_here
 * to resolve each row where it is written. The tile's 16-byte output vectors
 * (row c / OC, column chunk c % OC) are dealt over NTHREADS threads,
 * vectors tid, tid + NTHREADS, ...; where NTHREADS is a multiple of OC a
 * thread keeps its column chunk and its rows are NTHREADS / OC apart, and
 * the loop unrolls into constant offsets (the rolled loop's index
 * arithmetic took most of the instructions of a DeepSeek-V3 GEMM2 tile,
 * K = 256: Nsight Compute, docs/PERFORMANCE.md session 27).
 * A summing GEMM2 (sums_topk_of<Cfg>, standard format, C not in the sorted
 * order, so the output row is the slot) adds the row, rounded to T as a
 * stored row would be, into row slot / a.sum_topk of C (out_row's offset),
 * fp32 [M, ldc] and zeroed by
 * the launcher: the topk sum of the reduce step, done here in fp32 with
 * reductions in global memory (in no fixed order; the runtime's reduce
 * step then rounds each sum to T once). */
template <class Cfg, int NTHREADS, class Rows = rows_here>
__device__ __forceinline__ void write_tile(const mt_gemm_args &a, const tile_rows &t, int nb,
                                           const float *sC, int tid, Rows rows = Rows{})
{
    using T = typename Cfg::T;
    using S = tile_shape<Cfg>;
    const int out_limit = S::FUSED ? a.n_half : a.N;
    constexpr int OC = S::OUT_COLS / 8;
    T *C = static_cast<T *>(a.C);
    /* Output row offset and router weight of tile row r; false: no such row. */
    auto row_of = [&](int r, int64_t *dst, float *w) {
        if constexpr (Rows::TABLE) {
            *dst = rows.dst[r];
            *w = rows.w[r];
            return *dst >= 0;
        } else {
            return out_row<Cfg>(a, t, r, dst, w);
        }
    };
    /* The vector's values (v: the staged row, up: a fused tile's up half)
     * weighted and activated. */
    auto weigh_vec = [&](float w, float (&v)[8], const float (&up)[8]) {
        /* Gate and up are rounded to the element type first, as the
         * unfused path stores them: the fused result then matches the
         * unfused one (and the oracle's rounding points). silu by silu8,
         * the act step's steps (bit for bit silu()). */
#pragma unroll
        for (int q = 0; q < 8; q++)
            v[q] = S::FUSED ? round_to<T>(v[q] * w) : v[q] * w;
        if constexpr (S::FUSED) {
            if constexpr (Cfg::EPI == 1) {
                silu8(v);
            } else {
#pragma unroll
                for (int q = 0; q < 8; q++)
                    v[q] = activate<Cfg::EPI - 1>(v[q]);
            }
#pragma unroll
            for (int q = 0; q < 8; q++)
                v[q] *= round_to<T>(up[q] * w);
        }
    };
    /* ... and stored, or summed. */
    auto store_vec = [&](int64_t dst, int col0, float (&v)[8]) {
        if constexpr (sums_topk_of<Cfg>::value) {
            static_assert(Cfg::FORMAT == 0 && !S::FUSED, "the topk sum: GEMM2 of the standard format");
#pragma unroll
            for (int q = 0; q < 8; q++)
                v[q] = round_to<T>(v[q]);
            float *sum = static_cast<float *>(a.C) + dst + col0;
            red_add4(sum, v);
            red_add4(sum + 4, v + 4);
        } else {
            vec8 out;
#pragma unroll
            for (int q = 0; q < 4; q++)
                out.w[q] = pack2<T>(v[2 * q], v[2 * q + 1]);
            *reinterpret_cast<vec8 *>(C + dst + col0) = out;
        }
    };
    if constexpr (NTHREADS % OC == 0) {
        /* A thread's vectors in batches: the row lookups of a batch, then
         * its staged values (every row of the tile is staged, so they are
         * read whether the row is there or not), then its stores. One
         * vector after the other, each store waited on its row lookup and
         * the loads behind it: a chain of shared-memory latencies per
         * vector that set the pace of a short-K tile's epilogue. */
        constexpr int RSTEP = NTHREADS / OC, ITERS = (Cfg::BM + RSTEP - 1) / RSTEP;
        constexpr int BATCH = S::FUSED ? 2 : 4;
        const int r0 = tid / OC, cc = tid % OC, col0 = nb * S::OUT_COLS + cc * 8;
        if (col0 >= out_limit)
            return;
#pragma unroll
        for (int i0 = 0; i0 < ITERS; i0 += BATCH) {
            int64_t dst[BATCH];
            float w[BATCH], v[BATCH][8], up[S::FUSED ? BATCH : 1][8];
            bool in[BATCH], live[BATCH];   /* a row of the tile; one to store */
#pragma unroll
            for (int b = 0; b < BATCH; b++) {
                const int i = i0 + b, r = r0 + i * RSTEP;
                dst[b] = 0, w[b] = 0.f;
                in[b] = i < ITERS && (Cfg::BM % RSTEP == 0 || r < Cfg::BM);
                live[b] = in[b] && row_of(r, &dst[b], &w[b]);
            }
#pragma unroll
            for (int b = 0; b < BATCH; b++)
                if (in[b]) {
                    const int r = r0 + (i0 + b) * RSTEP;
                    epi_load8<S::LDC>(sC, r, cc * 8, v[b]);
                    if constexpr (S::FUSED)
                        epi_load8<S::LDC>(sC, r, cc * 8 + Cfg::BN / 2, up[b]);
                }
#pragma unroll
            for (int b = 0; b < BATCH; b++)
                if (live[b]) {
                    weigh_vec(w[b], v[b], up[S::FUSED ? b : 0]);
                    store_vec(dst[b], col0, v[b]);
                }
        }
    } else {
        for (int c = tid; c < Cfg::BM * OC; c += NTHREADS) {
            const int r = c / OC, col0 = nb * S::OUT_COLS + (c % OC) * 8;
            int64_t dst;
            float w, v[8], up[8];
            if (col0 >= out_limit || !row_of(r, &dst, &w))
                continue;
            epi_load8<S::LDC>(sC, r, (c % OC) * 8, v);
            if constexpr (S::FUSED)
                epi_load8<S::LDC>(sC, r, (c % OC) * 8 + Cfg::BN / 2, up);
            weigh_vec(w, v, up);
            store_vec(dst, col0, v);
        }
    }
}

/* Both halves, for kernels whose every thread holds fragments. */
template <class Cfg, class Acc, class FAcc, class Rows = rows_here>
__device__ __forceinline__ void store_tile(const mt_gemm_args &a, const tile_rows &t, int nb, int warp_m,
                                           int warp_n, const Acc &acc, const FAcc &facc,
                                           unsigned char *smem, Rows rows = Rows{})
{
    float *sC = reinterpret_cast<float *>(smem);
    stage_fragments<Cfg>(a, t, nb, warp_m, warp_n, threadIdx.x & 31, acc, facc, sC);
    __syncthreads();
    write_tile<Cfg, tile_shape<Cfg>::THREADS>(a, t, nb, sC, threadIdx.x, rows);
}

} // namespace mt
