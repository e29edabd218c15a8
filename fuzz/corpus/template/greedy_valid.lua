-- A greedy valid(): a table that grows on every call.
local keep = {}
return {
  family = "validloop", version = 1,
  params = { { name = "BLOCK_M", abbrev = "m", values = { 16, 32 } } },
  default_set = { { BLOCK_M = 16 } },
  valid = function(p, target)
    while true do keep[#keep + 1] = string.rep("y", 4096) .. #keep end
  end,
  launch = function(p, target) return { threads = 128, smem = 0 } end,
  render = function(p, name) return "" end,
}
