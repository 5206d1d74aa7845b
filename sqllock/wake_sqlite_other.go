//go:build !linux

package sqllock

import "errors"

// watchDir is not implemented outside Linux: SQLite waiters poll there.
func watchDir(string, func(string), func()) (dirWatcher, error) {
	return nil, errors.ErrUnsupported
}
