package kubelock

import (
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sameSecondSpan bounds, on the holder's monotonic clock, the span of a
// holder's writes that carry the same renewTime second. A client-go
// candidate sees a Lease as its record at one-second precision and
// restarts its count of leaseDurationSeconds only when that record
// changes, so all writes of one second look like the first of them to
// it: leaseDurationSeconds (⌈TTL⌉ + 1) covers this span and the 0.9×TTL
// after the last of them (see DESIGN.md).
const sameSecondSpan = time.Second

// renewMark is the renewTime second a holder last wrote on a Lease and
// the monotonic time of its first attempt to write that second.
type renewMark struct {
	sec   int64
	first time.Time
}

// renewTime returns the renewTime owner writes now on lease, and notes
// it. It is the wall clock's now, unless owner wrote a renewTime of the
// same second or later before (lease is as owner last wrote it): then it
// repeats that second while the first write of it is less than
// sameSecondSpan ago on the monotonic clock, and takes the next second
// after that. So a step back of the holder's wall clock never makes its
// record look unchanged to client-go for longer than sameSecondSpan; the
// renewTime written runs ahead of the wall clock by at most the step.
func (d *kubeDriver) renewTime(lease *coordv1.Lease, owner string) metav1.MicroTime {
	now := time.Now()
	at := now
	if holderOf(lease) == owner && lease.Spec.RenewTime != nil {
		prev := lease.Spec.RenewTime.Unix()
		if now.Unix() <= prev {
			at = time.Unix(prev+1, 0)
			d.mu.Lock()
			m, ok := d.marks[lease.Name]
			d.mu.Unlock()
			if ok && m.sec == prev && now.Sub(m.first) < sameSecondSpan {
				at = lease.Spec.RenewTime.Time // the same second as before
			}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if m, ok := d.marks[lease.Name]; !ok || m.sec != at.Unix() {
		d.marks[lease.Name] = renewMark{sec: at.Unix(), first: now}
	}
	return metav1.NewMicroTime(at)
}
