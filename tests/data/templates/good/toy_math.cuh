// Included twice by toy.cuh: the amalgamation must keep one copy.
__device__ inline float toy_scale(float x) { return 0.5f * x + 1.0f; }
