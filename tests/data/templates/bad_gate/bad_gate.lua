-- A family whose only_if reads a parameter declared after its own: an
-- error naming both when a walk or a lookup asks it (tests/test_gen.c).
return {
  family = "bad_gate",
  version = 1,
  params = {
    { name = "A", abbrev = "a", values = { 1, 2 } },
    { name = "B", abbrev = "b", values = { 0, 1 }, only_if = function(p) return p.C == 1 end },
    { name = "C", abbrev = "c", values = { 0, 1 } },
  },
  default_set = { {} },
  launch = function(p, target) return { threads = 32, smem = 0 } end,
  render = function(p, name)
    return 'extern "C" __global__ void ' .. name .. '(float *out) { out[0] = 1.0f; }\n'
  end,
}
