package redislock

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/redislock/internal/testhook"
)

// init gives the test module what it checks of the internals (see package
// testhook).
func init() {
	testhook.InspectHash = func(ctx context.Context, c redis.UniversalClient, key string) ([]any, error) {
		return inspectHashScript.Run(ctx, c, []string{key}).Slice()
	}
	testhook.Scripts = scripts
	testhook.ScriptVars = commonVars
	testhook.ParseValue = parseValue
	testhook.New = func(client redis.UniversalClient) (*dlock.Locker, driver.Driver, error) {
		return newLocker(client, nil, false)
	}
}
