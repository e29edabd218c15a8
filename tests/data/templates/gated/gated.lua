-- A test family of parameters offered in corners of the space (only_if),
-- built for two targets (archs); its rules are restated in C in
-- tests/test_gen.c (gated_expect): 2 kinds x 3 WIDTHs x 3 EXTRAs x 2
-- TAILs = 36 points.
return {
  family = "gated",
  version = 1,
  doc = "test family: parameters with only_if, and archs",
  archs = { "sm_80", "sm_90a" },
  params = {
    { name = "kind",  abbrev = "",  values = { "a", "b" } },
    { name = "WIDTH", abbrev = "w", values = { 1, 2, 4 } },
    { name = "EXTRA", abbrev = "e", values = { "off", "on", "max" },
      only_if = function(p)
        if p.kind ~= "b" then return false, "EXTRA: kind b only" end
        if p.WIDTH < 2 then return false, "EXTRA: WIDTH 2 or more" end
        return true
      end },
    -- No reason given: the generator words one.
    { name = "TAIL",  abbrev = "t", values = { 0, 1 }, omit_in_name = 0,
      only_if = function(p) return p.EXTRA ~= "off" end },
  },
  default_set = { { WIDTH = 2 } },
  valid = function(p, target)
    if p.EXTRA == "max" and p.WIDTH == 4 then return false, "EXTRA max: WIDTH 2" end
    return true
  end,
  launch = function(p, target)
    return { threads = 32 * p.WIDTH, smem = 0 }
  end,
  render = function(p, name)
    return mt.subst([[
extern "C" __global__ void ${NAME}(float *out)
{
    out[threadIdx.x] = ${WIDTH} + ${TAIL};
}
]], { NAME = name, WIDTH = p.WIDTH, TAIL = p.TAIL })
  end,
}
