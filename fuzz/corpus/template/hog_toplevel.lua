-- A memory hog while the template file itself runs (at load).
local t = {}
local s = string.rep("x", 1024)
for i = 1, 1e9 do t[i] = s .. i end
