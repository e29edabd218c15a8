-- A family that gained a parameter (SPLIT) after kernels were named: its
-- first value stays out of the names, which keep their older spelling.
return {
  family = "renamed",
  version = 2,
  params = {
    { name = "BLOCK", abbrev = "b", values = { 32, 64 } },
    { name = "SPLIT", abbrev = "sp", values = { "off", "on" }, omit_in_name = "off" },
  },
  default_set = { {} },
  launch = function(p, target) return { threads = p.BLOCK, smem = 0 } end,
  render = function(p, name)
    return mt.subst('extern "C" __global__ void ${NAME}() {}\n', { NAME = name })
  end,
}
