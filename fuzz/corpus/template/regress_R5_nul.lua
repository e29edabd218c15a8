-- render() returns a string with a NUL byte in it.
return {
  family = "regress_r5", version = 1,
  params = { { name = "BLOCK_M", abbrev = "m", values = { 16 } } },
  default_set = { { BLOCK_M = 16 } },
  valid = function(p, target) return true end,
  launch = function(p, target) return { threads = 128, smem = 0 } end,
  render = function(p, name)
    return 'extern "C" __global__ void ' .. name .. '() {}\0 this part is dropped by NVRTC\n'
  end,
}
