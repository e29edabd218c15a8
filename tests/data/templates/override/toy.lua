-- Overrides the family "toy" of the good/ folder (tests/test_gen.c).
return {
  family = "toy",
  version = 7,
  doc = "user override of toy",
  params = { { name = "WIDTH", abbrev = "w", values = { 1, 2 } } },
  default_set = { {} },
  launch = function(p, target) return { threads = 32, smem = 0 } end,
  render = function(p, name)
    return 'extern "C" __global__ void ' .. name .. '(int *o) { o[0] = ' .. p.WIDTH .. '; }\n'
  end,
}
