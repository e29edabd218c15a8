return {
  family = "bad_default",
  version = 1,
  params = { { name = "BLOCK_M", abbrev = "m", values = { 16, 32, 64 } } },
  default_set = { { BLOCK_M = 48 } },
  launch = function(p, target) return { threads = 32, smem = 0 } end,
  render = function(p, name) return "" end,
}
