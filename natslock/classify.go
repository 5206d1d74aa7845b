package natslock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlock-go/dlock/driver"
)

// jsInsufficientResources is JetStream's error code for a write refused
// for lack of storage (the account's or the server's).
const jsInsufficientResources = 10047

// transientErrors are the client's errors for a server that could not be
// reached or did not answer: another attempt may succeed.
var transientErrors = []error{
	nats.ErrTimeout, nats.ErrNoResponders, nats.ErrNoServers, nats.ErrDisconnected,
	nats.ErrConnectionReconnecting, jetstream.ErrNoStreamResponse, context.DeadlineExceeded,
}

// deniedErrors are the server's refusals of the credentials or of a
// subject they are not granted.
var deniedErrors = []error{nats.ErrAuthorization, nats.ErrPermissionViolation, nats.ErrAuthExpired}

// errorKinds is NATS's driver.Classifier, embedded in natsDriver; Open
// uses it before there is a driver (driver.StoreError).
type errorKinds struct{}

// Classify implements driver.Classifier: ErrorDenied for one of
// deniedErrors; ErrorNoSpace for a write JetStream refused for lack of
// storage (a full bucket, MaxBytes, or the server's limits);
// ErrorTransient for one of transientErrors and a JetStream API error
// with status 503 (no stream leader, during an election).
func (errorKinds) Classify(err error) driver.ErrorKind {
	var api *jetstream.APIError
	isAPI := errors.As(err, &api)
	switch {
	case wrapsAny(deniedErrors, err):
		return driver.ErrorDenied
	case isAPI && (api.ErrorCode == jsInsufficientResources || strings.Contains(api.Description, "maximum bytes")):
		return driver.ErrorNoSpace
	case wrapsAny(transientErrors, err), isAPI && api.Code == 503:
		return driver.ErrorTransient
	}
	return driver.ErrorOther
}

// wrapsAny reports whether err wraps one of errs.
func wrapsAny(errs []error, err error) bool {
	return slices.ContainsFunc(errs, func(e error) bool { return errors.Is(err, e) })
}

// fail returns err of the step op on name with the package and the step
// said, unless it is nil or says them already (not held, mode).
func (d *natsDriver) fail(op, name string, err error) error {
	if err == nil || errors.Is(err, driver.ErrNotHeld) || errors.Is(err, driver.ErrMode) {
		return err
	}
	if name == "" {
		return fmt.Errorf("natslock: %s: %w", op, err)
	}
	return fmt.Errorf("natslock: %s %q: %w", op, name, err)
}
