package main

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// seconds is a duration flag that also takes bare seconds, as flock's
// -w does: "10" and "1.5" are seconds, "1m30s" a Go duration.
type seconds struct{ d *time.Duration }

func (s seconds) Set(v string) error {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > float64(math.MaxInt64/int64(time.Second)) {
			return fmt.Errorf("%q is out of range", v)
		}
		*s.d = time.Duration(f * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q is neither seconds nor a duration such as 1m30s", v)
	}
	*s.d = d
	return nil
}

// String is the duration as a Go duration, and zero as "0": as a bare
// number of seconds, which pflag takes for a zero default and does not
// show in --help (where "0s" showed as "(default 0s)").
func (s seconds) String() string {
	if *s.d == 0 {
		return "0"
	}
	return s.d.String()
}

func (s seconds) Type() string { return "duration" }
