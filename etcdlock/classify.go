package etcdlock

import (
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/dlock-go/dlock"
)

// deniedErrors are etcd's refusals of the client's credentials, or of a
// step its roles do not grant.
var deniedErrors = []error{
	rpctypes.ErrPermissionDenied, // the role lacks the key range
	rpctypes.ErrAuthFailed,       // wrong user or password
	rpctypes.ErrUserEmpty,        // no user, with authentication on
	rpctypes.ErrUserNotFound,
}

// classify returns err wrapped with the dlock sentinel that names what
// etcd refused, if any, and err otherwise: dlock.ErrDenied for one of
// deniedErrors, dlock.ErrNoSpace for etcd's "database space exceeded"
// (the backend quota is full, or the NOSPACE alarm is raised: etcd then
// refuses every put and lease grant, but still serves reads, deletes and
// keep-alives). Retrying does not help either.
func classify(err error) error {
	if err == nil || errors.Is(err, dlock.ErrDenied) || errors.Is(err, dlock.ErrNoSpace) {
		return err
	}
	if errors.Is(err, rpctypes.ErrNoSpace) {
		return fmt.Errorf("%w: %w", dlock.ErrNoSpace, err)
	}
	for _, d := range deniedErrors {
		if errors.Is(err, d) {
			return fmt.Errorf("%w: %w", dlock.ErrDenied, err)
		}
	}
	return err
}
