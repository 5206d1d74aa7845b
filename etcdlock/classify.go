package etcdlock

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/driver"
)

// deniedErrors are etcd's refusals of the client's credentials, or of a
// step its roles do not grant.
var deniedErrors = []error{
	rpctypes.ErrPermissionDenied, // the role lacks the key range
	rpctypes.ErrAuthFailed,       // wrong user or password
	rpctypes.ErrUserEmpty,        // no user, with authentication on
	rpctypes.ErrUserNotFound,
}

// errorKinds is etcd's driver.Classifier, embedded in etcdDriver; Open
// uses it before there is a driver (driver.StoreError).
type errorKinds struct{}

// Classify implements driver.Classifier: ErrorNoSpace for etcd's
// "database space exceeded" (the backend quota is full, or the NOSPACE
// alarm is raised: etcd then refuses every put and lease grant, but still
// serves reads, deletes and keep-alives); ErrorDenied for one of
// deniedErrors or a client certificate the server refused; ErrorTransient
// for a lost session (a new one is granted) and a server that is
// unavailable or did not answer in time. It is the one definition of
// "transient" for this driver: queued waiters retry those errors.
func (errorKinds) Classify(err error) driver.ErrorKind {
	switch {
	case errors.Is(err, rpctypes.ErrNoSpace):
		return driver.ErrorNoSpace
	case wrapsAny(deniedErrors, err), backend.CertificateRefused(err), errors.Is(err, errNoClientCert):
		return driver.ErrorDenied
	case errors.Is(err, dlock.ErrClosed):
		return driver.ErrorOther
	case errors.Is(err, errLeaseGone):
		return driver.ErrorTransient
	}
	var code codes.Code
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	} else if st, ok := status.FromError(err); ok {
		code = st.Code()
	}
	if code == codes.Unavailable || code == codes.DeadlineExceeded {
		return driver.ErrorTransient
	}
	return driver.ErrorOther
}

// wrapsAny reports whether err wraps one of errs.
func wrapsAny(errs []error, err error) bool {
	for _, e := range errs {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
