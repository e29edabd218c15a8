return {
  family = "bad_omit",
  version = 1,
  params = { { name = "SPLIT", abbrev = "sp", values = { "off", "on" }, omit_in_name = "none" } },
  default_set = { {} },
  launch = function(p, target) return { threads = 32, smem = 0 } end,
  render = function(p, name) return "x" end,
}
