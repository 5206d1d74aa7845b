return x + {{x}}
