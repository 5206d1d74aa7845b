//go:build race

package soak

// raceEnabled reports whether this binary runs under the race detector.
const raceEnabled = true
