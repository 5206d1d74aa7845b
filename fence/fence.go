package fence

import (
	"github.com/dlock-go/dlock/internal/fencerule"
)

// ErrStale is wrapped by the error of a write whose token is below the
// highest token that has written the resource: its lock was lost and
// another holder has written since. Every fenced store returns it:
// Guard, Update, redislock.Fence, etcdlock.Fence and sqllock.FenceTable.
var ErrStale = fencerule.ErrStale

// prefix starts this package's error messages.
const prefix = "fence"
