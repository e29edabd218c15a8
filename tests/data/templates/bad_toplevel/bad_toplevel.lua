-- Tries to open a file while loading: the sandbox has no io.
local f = io.open("/tmp/moetune-evil-was-here", "w")
return { family = "bad_toplevel" }
