local x = {{x}}
local y = '{{y}}'