// Helpers of go-redis shared by redislock and redlock (error classes, a quiet logger,
// the assembler of Lua scripts kept in .lua files): a module of its own so that the
// root module needs no Redis client.
module github.com/dlock-go/dlock/internal/goredis

go 1.26.0

require github.com/redis/go-redis/v9 v9.23.0

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dlock-go/dlock v0.0.0-20261126022123-99c02b3cd452
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/dlock-go/dlock => ../..
