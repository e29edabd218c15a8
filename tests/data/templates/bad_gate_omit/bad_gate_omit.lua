-- only_if on a parameter whose omit_in_name is not its first value: the
-- variants made before the parameter would resolve to a value that only_if
-- may refuse (tests/test_gen.c).
return {
  family = "bad_gate_omit",
  version = 1,
  params = {
    { name = "A", abbrev = "a", values = { 1, 2 } },
    { name = "B", abbrev = "b", values = { 0, 1 }, omit_in_name = 1,
      only_if = function(p) return p.A == 2 end },
  },
  default_set = { {} },
  launch = function(p, target) return { threads = 32, smem = 0 } end,
  render = function(p, name)
    return 'extern "C" __global__ void ' .. name .. '(float *out) { out[0] = 1.0f; }\n'
  end,
}
