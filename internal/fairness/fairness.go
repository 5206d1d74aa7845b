// Package fairness measures how evenly a resource was shared, for the
// demo's summary and the benchmark's report.
package fairness

// Jain returns Jain's fairness index of counts: (Σx)² / (n·Σx²), 1 when all
// are equal, 1/n when one has everything, and 0 when there are none or all
// are zero (nothing was shared, which a stuck run must not hide as "even").
func Jain(counts []int) float64 {
	var sum, squares float64
	for _, c := range counts {
		sum += float64(c)
		squares += float64(c) * float64(c)
	}
	if squares == 0 {
		return 0
	}
	return sum * sum / (float64(len(counts)) * squares)
}
