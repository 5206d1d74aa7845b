-- part1.lua
local function twice(x)
  return x * 2
end
