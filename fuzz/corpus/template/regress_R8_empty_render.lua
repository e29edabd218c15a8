-- render() returns the empty string.
return {
  family = "regress_r8", version = 1,
  params = { { name = "BLOCK_M", abbrev = "m", values = { 16 } } },
  default_set = { { BLOCK_M = 16 } },
  valid = function(p, target) return true end,
  launch = function(p, target) return { threads = 32, smem = 0 } end,
  render = function(p, name) return "" end,
}
