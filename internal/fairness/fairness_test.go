package fairness_test

import (
	"math"
	"testing"

	"github.com/dlock-go/dlock/internal/fairness"
)

func TestJain(t *testing.T) {
	for _, tc := range []struct {
		counts []int
		want   float64
	}{
		{[]int{5, 5, 5, 5}, 1},
		{[]int{8, 0, 0, 0}, 0.25},
		{[]int{3, 1}, 0.8},
		{[]int{0, 0}, 0},
		{nil, 0},
	} {
		if got := fairness.Jain(tc.counts); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Jain(%v) = %v, want %v", tc.counts, got, tc.want)
		}
	}
}
