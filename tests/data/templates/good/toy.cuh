// Hand-written device code of the toy test family.
#pragma once
#include <cuda_fp16.h>
#include "toy_math.cuh"
#include "toy_math.cuh"

template <typename T, int BLOCK, int STAGES>
__device__ void toy_body(T *out)
{
    extern __shared__ float buf[];
    int i = threadIdx.x % BLOCK;
    buf[i] = toy_scale((float)threadIdx.x) * STAGES;
    __syncthreads();
    out[blockIdx.x * BLOCK + i] = T(buf[(i + 1) % BLOCK]);
}
