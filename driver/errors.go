package driver

import "strconv"

// ErrorKind says what a store's error means to the core, as a
// Classifier tells it. The core wraps dlock.ErrDenied or dlock.ErrNoSpace
// around the errors of the matching kinds and decides retries by kind.
//
// "Not held" is not a kind: a driver returns an error wrapping
// ErrNotHeld for an owner-checked step that found another owner (or
// none), and the core checks for it before it asks the Classifier.
type ErrorKind uint8

const (
	// ErrorOther is none of the below: the core returns the error as it
	// is.
	ErrorOther ErrorKind = iota
	// ErrorTransient is the store that could not be reached or answer
	// (timeout, reset, leader change, busy): another attempt may succeed.
	ErrorTransient
	// ErrorDenied is the store refusing the credentials or a step they
	// are not granted: never retried.
	ErrorDenied
	// ErrorNoSpace is the store refusing writes for lack of space (quota,
	// maxmemory, disk full): never retried.
	ErrorNoSpace
)

// String returns the kind's name: "other", "transient", "denied" or
// "no space".
func (k ErrorKind) String() string {
	switch k {
	case ErrorOther:
		return "other"
	case ErrorTransient:
		return "transient"
	case ErrorDenied:
		return "denied"
	case ErrorNoSpace:
		return "no space"
	}
	return "ErrorKind(" + strconv.Itoa(int(k)) + ")"
}

// Classifier is implemented by a driver that can tell its store's errors
// apart. The core asks it about every error of a driver step (and
// backends, through StoreError, about the errors of opening a
// store); a driver without it has every error taken as ErrorOther.
//
// Classify is given the error as the driver returned it, wrapped or not;
// it looks through the chain (errors.Is, errors.As) for the store's own
// errors. It must be safe for concurrent use and must not block.
type Classifier interface {
	Classify(err error) ErrorKind
}
