// redislock and redlock on the valkey-go client: a module of its own, so that
// valkey-go reaches only the programs that import it.
module github.com/dlock-go/dlock/valkeyredis

go 1.26.0

require (
	github.com/dlock-go/dlock v0.0.0-20261126022123-99c02b3cd452
	github.com/dlock-go/dlock/redislock v0.0.0-20261126022123-99c02b3cd452
	github.com/dlock-go/dlock/redlock v0.0.0-20261126022123-99c02b3cd452
	github.com/valkey-io/valkey-go v1.0.79
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dlock-go/dlock/internal/goredis v0.0.0-20261126022123-99c02b3cd452 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

// Development inside the repository: scripts/release requires the tagged
// version of each module instead and drops these replaces when it tags.
replace (
	github.com/dlock-go/dlock => ..
	github.com/dlock-go/dlock/internal/goredis => ../internal/goredis
	github.com/dlock-go/dlock/redislock => ../redislock
	github.com/dlock-go/dlock/redlock => ../redlock
)
