package main

import (
	"strings"
	"testing"
)

// A hot-name run without acquisitions (masters down) has no wait
// percentiles and no fairness: the report shows a dash, not 0 µs.
func TestAddHotWithoutAcquisitions(t *testing.T) {
	fg := figures{}
	fg.addHot("k", computeHot([]hotHalf{{Censored: []int64{5e8, 5e8}}}, 2, 0, 1e9, nil))
	for _, m := range []string{mWaitP50, mWaitP99, mJain} {
		if got := fg.get("k", m).format(fDur); got != noValue {
			t.Errorf("figure %s of a run without acquisitions = %q, want %q", m, got, noValue)
		}
	}
	if got := fg.get("k", mWaitMax).format(fDur); got != "500 ms" {
		t.Errorf("wait max of a run with callers waiting 500 ms = %q, want %q", got, "500 ms")
	}
}

// The killed condition gives the clients 3 live masters and the 2 killed
// addresses; the retries-off condition marks each address.
func TestRedlockAddrs(t *testing.T) {
	s := &redlockSet{dead: []string{"d1", "d2"}}
	for _, a := range []string{"m1", "m2", "m3", "m4", "m5"} {
		s.masters = append(s.masters, &redisServer{addr: a})
	}
	for _, c := range []struct {
		cond rlCondition
		want string
	}{
		{rlUp, "m1,m2,m3,m4,m5"},
		{rlStopped, "m1,m2,m3,m4,m5"},
		{rlKilled, "m1,m2,m3,d1,d2"},
		{rlKilled1, strings.Join([]string{"m1", "m2", "m3", "d1", "d2"}, noRetries+",") + noRetries},
	} {
		if got := s.addrs(c.cond); got != c.want {
			t.Errorf("addrs(%s) = %q, want %q", c.cond.key, got, c.want)
		}
	}
}
