// Session 60's probe: may a decode pipeline's GEMM2 find its weights in the
// L2, fetched there while GEMM1 streams its own? Two weight streams as a
// one-token MoE layer reads them: A (GEMM1's, bytes_a) then B (GEMM2's,
// bytes_b), each read once by a grid of CTAs in 16-byte loads past L1 (as
// grouped_gemv reads weights). Variants, each timed as the median of REPS
// runs after an L2 flush, the whole span (A's start to B's end) and B's own
// kernel:
//   plain     A, then B
//   pf        a prefetch kernel (cp.async.bulk.prefetch.L2 of B in slices,
//             one per CTA) launched just before A, then A, then B
//   pf_last   the same with an L2 evict_last policy on the prefetches
//   pf_in_a   A's CTAs each prefetch a slice of B at their start
//   pf_in_a_last  the same, evict_last
//   last_first    pf_in_a_last with A's loads evict_first
// Build and run (sm_90a): nvcc -O3 -arch=sm_90a -o /tmp/probe l2-prefetch-probe.cu && /tmp/probe
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); return 1; } } while (0)

__device__ __forceinline__ uint64_t policy_last()
{
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
    return p;
}
__device__ __forceinline__ uint64_t policy_first()
{
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}
__device__ __forceinline__ void prefetch_l2(const void *p, uint32_t bytes, int last)
{
    if (last)
        asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;"
                     :: "l"(p), "r"(bytes), "l"(policy_last()) : "memory");
    else
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(p), "r"(bytes) : "memory");
}
// bytes of [base, base + total) that slice i of n covers, 16-byte aligned
__device__ __forceinline__ void slice_of(size_t total, int i, int n, size_t *off, uint32_t *len)
{
    size_t per = (total / n + 15) & ~size_t(15);
    size_t o = per * i;
    *off = o < total ? o : total;
    size_t e = o + per < total ? o + per : total;
    *len = (uint32_t)(e > *off ? e - *off : 0);
}
// Bulk prefetches of at most 1 MB each over a slice.
__device__ void prefetch_slice(const char *b, size_t bytes_b, int i, int n, int last)
{
    size_t off;
    uint32_t len;
    slice_of(bytes_b, i, n, &off, &len);
    for (uint32_t d = 0; d < len; d += (1u << 20))
        prefetch_l2(b + off + d, min(len - d, 1u << 20), last);
}

__global__ void prefetch_kernel(const char *b, size_t bytes_b, int last)
{
    if (threadIdx.x == 0)
        prefetch_slice(b, bytes_b, blockIdx.x, gridDim.x, last);
}

// Each CTA reads its slice of src in 16-byte loads, 4 in flight a thread.
template <int MODE>   // 0 plain, 1 prefetch B first, 2 evict_last prefetch, 3 + A evict_first
__global__ void __launch_bounds__(256) stream_kernel(const uint4 *src, size_t n16, float *sink,
                                                      const char *b, size_t bytes_b)
{
    if (MODE >= 1 && threadIdx.x == 0)
        prefetch_slice(b, bytes_b, blockIdx.x, gridDim.x, MODE >= 2);
    size_t per = (n16 + gridDim.x - 1) / gridDim.x;
    size_t lo = per * blockIdx.x, hi = min(n16, lo + per);
    uint32_t acc = 0;
    uint64_t pol = 0;
    if (MODE == 3)
        pol = policy_first();
    for (size_t i = lo + threadIdx.x; i < hi; i += 4 * blockDim.x) {
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            size_t j = i + u * blockDim.x;
            if (j < hi) {
                if (MODE == 3)
                    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                                 : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                                 : "l"(src + j), "l"(pol));
                else
                    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                                 : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                                 : "l"(src + j));
            } else {
                v[u] = make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int u = 0; u < 4; u++)
            acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    if (acc == 0x12345678u)
        sink[blockIdx.x] = 1.f;
}

static float median(std::vector<float> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char **argv)
{
    int dev = 0, sms = 0;
    CK(cudaSetDevice(dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    int l2 = 0;
    CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    printf("SMs %d, L2 %d MB\n", sms, l2 >> 20);
    const size_t flush_bytes = size_t(512) << 20;
    char *flush;
    CK(cudaMalloc(&flush, flush_bytes));
    float *sink;
    CK(cudaMalloc(&sink, 1 << 20));
    // (A MB, B MB): Qwen3 bf16, DeepSeek-V3 fp8, Qwen3 fp8, DeepSeek-V2-Lite bf16 at M = 1
    const double shapes[][2] = {{50.3, 25.2}, {29.4, 14.7}, {25.2, 12.6}, {69.2, 34.6}};
    const char *names[] = {"plain", "pf", "pf_last", "pf_in_a", "pf_in_a_last", "last_first"};
    const int reps = 30;
    cudaEvent_t e0, e1, e2;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventCreate(&e2));
    for (auto &s : shapes) {
        size_t ba = size_t(s[0] * 1e6) & ~size_t(15), bb = size_t(s[1] * 1e6) & ~size_t(15);
        char *a, *b;
        CK(cudaMalloc(&a, ba));
        CK(cudaMalloc(&b, bb));
        CK(cudaMemset(a, 1, ba));
        CK(cudaMemset(b, 2, bb));
        const int ga = sms * 4, gb = sms * 4;
        for (int v = 0; v < 6; v++) {
            std::vector<float> total, bt;
            for (int r = 0; r < reps + 3; r++) {
                CK(cudaMemsetAsync(flush, r, flush_bytes));
                CK(cudaEventRecord(e0));
                if (v == 1 || v == 2)
                    prefetch_kernel<<<ga, 32>>>(b, bb, v == 2);
                switch (v) {
                case 0: case 1: case 2:
                    stream_kernel<0><<<ga, 256>>>((const uint4 *)a, ba / 16, sink, b, bb); break;
                case 3: stream_kernel<1><<<ga, 256>>>((const uint4 *)a, ba / 16, sink, b, bb); break;
                case 4: stream_kernel<2><<<ga, 256>>>((const uint4 *)a, ba / 16, sink, b, bb); break;
                case 5: stream_kernel<3><<<ga, 256>>>((const uint4 *)a, ba / 16, sink, b, bb); break;
                }
                CK(cudaEventRecord(e1));
                stream_kernel<0><<<gb, 256>>>((const uint4 *)b, bb / 16, sink, b, bb);
                CK(cudaEventRecord(e2));
                CK(cudaEventSynchronize(e2));
                CK(cudaGetLastError());
                float t01, t12;
                CK(cudaEventElapsedTime(&t01, e0, e1));
                CK(cudaEventElapsedTime(&t12, e1, e2));
                if (r >= 3) {
                    total.push_back((t01 + t12) * 1000.f);
                    bt.push_back(t12 * 1000.f);
                }
            }
            printf("A %.1f MB B %.1f MB %-13s total %7.1f us  B alone %6.1f us  (A+B %.2f TB/s)\n",
                   s[0], s[1], names[v], median(total), median(bt),
                   (ba + bb) / (median(total) * 1e-6) / 1e12);
        }
        CK(cudaFree(a));
        CK(cudaFree(b));
    }
    return 0;
}
