local t = 1
local u = {{1}}
