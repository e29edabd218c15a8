return {
  family = "bad_values",
  version = 1,
  params = { { name = "SPLIT_K", abbrev = "k", values = { 1, 2, true } } },
  default_set = { {} },
  launch = function(p, target) return { threads = 32, smem = 0 } end,
  render = function(p, name) return "" end,
}
