-- Misbehaving template for the sandbox tests: parameter `what` picks the
-- misdeed, done in valid(), launch() or render() (tests/test_gen.c).
local misdeeds = {
  os = function() os.execute("touch /tmp/moetune-evil-was-here") end,
  io = function() io.open("/tmp/moetune-evil-was-here", "w") end,
  require = function() require("os") end,
  load = function() load("return 1")() end,
  dofile = function() dofile("/etc/hostname") end,
  dump = function() string.dump(function() end) end,
  random = function() return math.random() end,
  debug = function() debug.sethook() end,
  pwrite = function(p) p.what = "changed" end,
  undeclared = function(p) return p.BLOCK_M end,
  hog = function() local s = "x" while true do s = s .. s end end,
  pcallhog = function()
    while true do pcall(function() local s = "x" while true do s = s .. s end end) end
  end,
  nonstring = function() return 42 end,
  -- Pattern matching backtracks in C, out of the instruction budget's
  -- reach (30 "a*" against 30 bytes ran past a minute; 14 take seconds).
  match = function() return string.find(string.rep("a", 14), string.rep("a*", 14) .. "b") end,
  gsubmethod = function() return ("a"):gsub("a", "b") end,
  -- A finalizer runs where the budget does not reach (lua_close, the
  -- collection after a failed call): refused by setmetatable.
  finalizer = function() setmetatable({}, { __gc = function() while true do end end }) end,
  -- Four instructions a turn, each s:upper() a MiB of work in C: the
  -- budget counts the bytes allocated too.
  upper = function() local s = string.rep("x", 1 << 20) while true do s:upper() end end,
}

return {
  family = "evil",
  version = 1,
  params = {
    { name = "what", values = { "ok", "loop", "pcallloop", "badlaunch", "os", "io", "require",
                                "load", "dofile", "dump", "random", "debug", "pwrite",
                                "undeclared", "hog", "pcallhog", "nonstring", "match",
                                "gsubmethod", "finalizer", "upper" } },
  },
  default_set = { { what = "ok" } },
  valid = function(p, target)
    if p.what == "loop" then while true do end end
    if p.what == "pcallloop" then
      while true do pcall(function() while true do end end) end
    end
    return true
  end,
  launch = function(p, target)
    if p.what == "badlaunch" then return { threads = 4096, smem = 0 } end
    return { threads = 32, smem = 0 }
  end,
  render = function(p, name)
    local f = misdeeds[p.what]
    if f then return f(p) end
    return 'extern "C" __global__ void ' .. name .. '(int *o) { o[0] = 1; }\n'
  end,
}
