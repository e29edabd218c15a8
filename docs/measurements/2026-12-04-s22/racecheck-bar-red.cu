// Does compute-sanitizer racecheck order shared-memory accesses across
// __syncthreads_or (bar.red.or) as it does across __syncthreads (bar.sync)?
// Threads 128..255 write s[], then every thread meets the CTA barrier, then
// threads 0..127 read what the others wrote. Variant 0: __syncthreads();
// variant 1: __syncthreads_or(pred), as the split-K warpgroup-MMA tile's
// epilogue does (templates/grouped_gemm_sm90.cuh); variant 2: as 1, after
// the writers first agreed on a flag with bar.red.or on named barrier 2 of
// their 128 threads (gemm_tile.cuh's group_barrier::any, the split-K
// reduction's vote); variant 3: as 2 with a plain __syncthreads() at the
// end. All four are race-free by the PTX memory model. Build: nvcc -arch=sm_90a -o racecheck-bar-red racecheck-bar-red.cu
#include <cstdio>
#include <cstdlib>
__global__ void probe(float *out, int variant)
{
    __shared__ float s[128];
    const int t = threadIdx.x;
    int vote = 1;
    if (variant >= 2 && t >= 128)
        asm volatile("{\n.reg .pred p, q;\nsetp.ne.b32 p, %1, 0;\nbar.red.or.pred q, 2, 128, p;\n"
                     "selp.b32 %0, 1, 0, q;\n}\n"
                     : "=r"(vote)
                     : "r"((int)(t == 200))
                     : "memory");
    if (t >= 128 && vote)
        s[t - 128] = (float)t;
    bool go = true;
    if (variant == 0 || variant == 3)
        __syncthreads();
    else
        go = __syncthreads_or(t >= 128);
    if (!go)
        return;
    if (t < 128)
        out[t] = s[127 - t];
}
int main(int argc, char **argv)
{
    const int variant = argc > 1 ? atoi(argv[1]) : 0;
    float *out, h[128];
    cudaMalloc(&out, sizeof h);
    probe<<<4, 256>>>(out, variant);
    cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int i = 0; i < 128; i++)
        bad += h[i] != (float)(255 - i);
    static const char *const what[] = {"__syncthreads", "__syncthreads_or", "named bar.red, then __syncthreads_or",
                                       "named bar.red, then __syncthreads"};
    printf("variant %d (%s): %d wrong of 128\n", variant, what[variant & 3], bad);
    return bad != 0;
}
