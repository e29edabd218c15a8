-- archs names a target the generator does not know (tests/test_gen.c).
return {
  family = "bad_archs",
  version = 1,
  archs = { "sm_90a", "sm_99" },
  params = { { name = "A", abbrev = "a", values = { 1, 2 } } },
  default_set = { {} },
  launch = function(p, target) return { threads = 32, smem = 0 } end,
  render = function(p, name)
    return 'extern "C" __global__ void ' .. name .. '(float *out) { out[0] = 1.0f; }\n'
  end,
}
