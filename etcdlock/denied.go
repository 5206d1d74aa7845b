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

// denied returns err wrapped with dlock.ErrDenied if it is one of
// deniedErrors, and err otherwise. Retrying does not help.
func denied(err error) error {
	if err == nil || errors.Is(err, dlock.ErrDenied) {
		return err
	}
	for _, d := range deniedErrors {
		if errors.Is(err, d) {
			return fmt.Errorf("%w: %w", dlock.ErrDenied, err)
		}
	}
	return err
}
