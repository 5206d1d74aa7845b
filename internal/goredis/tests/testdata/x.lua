local x = {{x}}
