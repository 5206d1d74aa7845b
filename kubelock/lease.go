package kubelock

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotations dlock keeps on its Leases, beside the fields client-go reads.
const (
	// annoGrant is "<fence> <owner>": the fencing token of owner's grant.
	// It describes the Lease only while owner is its holderIdentity: a
	// client-go holder leaves it as it found it.
	annoGrant = "dlock.dev/grant"
	// annoName is the dlock name of a Lease whose name is a digest.
	annoName = "dlock.dev/name"
	// annoMeta is the holder's dlock.WithMetadata, under the same rule as
	// annoGrant.
	annoMeta = "dlock.dev/metadata"
)

// leaseName returns the name of the Lease that holds name: name itself if
// it is a valid Lease name, else "dlock-" and 40 hex digits of its
// SHA-256.
func leaseName(name string) string {
	if len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "dlock-" + hex.EncodeToString(sum[:20])
}

// lockName returns the dlock name a Lease holds.
func lockName(l *coordv1.Lease) string {
	if n, ok := l.Annotations[annoName]; ok {
		return n
	}
	return l.Name
}

// holderOf returns the Lease's holderIdentity, "" when free.
func holderOf(l *coordv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// grantOf returns the fencing token of the Lease's current holder, and
// false when the holder is not a dlock owner that wrote annoGrant.
func grantOf(l *coordv1.Lease) (uint64, bool) {
	h := holderOf(l)
	fence, owner, ok := strings.Cut(l.Annotations[annoGrant], " ")
	if h == "" || !ok || owner != h {
		return 0, false
	}
	f, err := strconv.ParseUint(fence, 10, 64)
	return f, err == nil
}

// rvOf parses a resourceVersion: a positive integer since Kubernetes
// 1.35 made resource versions comparable (KEP-5504).
func rvOf(rv string) (uint64, bool) {
	f, err := strconv.ParseUint(rv, 10, 64)
	return f, err == nil && f > 0
}

// durationOf returns the Lease's leaseDurationSeconds as a duration, at
// least one second (client-go's release writes 1).
func durationOf(l *coordv1.Lease) time.Duration {
	if l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds < 1 {
		return time.Second
	}
	return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
}

// leaseSeconds is the leaseDurationSeconds a dlock holder of ttl writes:
// ttl rounded up to whole seconds, plus one for client-go, which compares
// records at one-second precision (see the package doc).
func leaseSeconds(ttl time.Duration) int32 {
	s := math.Ceil(ttl.Seconds()) + 1
	return int32(min(s, math.MaxInt32))
}

// grant sets l's spec and annotations for owner taking it with fence,
// as client-go's tryAcquireOrRenew writes a new holder: acquireTime now,
// renewTime at, leaseTransitions one more unless owner held it already.
func grant(l *coordv1.Lease, owner, metadata string, ttl time.Duration, fence uint64, at metav1.MicroTime) {
	if holderOf(l) != owner {
		now := metav1.NowMicro()
		var n int32 // 0 on a new Lease
		if l.ResourceVersion != "" {
			if l.Spec.LeaseTransitions != nil {
				n = *l.Spec.LeaseTransitions
			}
			n++
		}
		l.Spec.LeaseTransitions = &n
		l.Spec.AcquireTime = &now
	}
	l.Spec.HolderIdentity = &owner
	secs := leaseSeconds(ttl)
	l.Spec.LeaseDurationSeconds = &secs
	l.Spec.RenewTime = &at
	setAnnotation(l, annoGrant, strconv.FormatUint(fence, 10)+" "+owner)
	setAnnotation(l, annoMeta, metadata)
}

// renew sets l's renewTime to at and its duration to ttl's.
func renew(l *coordv1.Lease, ttl time.Duration, at metav1.MicroTime) {
	secs := leaseSeconds(ttl)
	l.Spec.LeaseDurationSeconds = &secs
	l.Spec.RenewTime = &at
}

// free sets l as client-go's ReleaseOnCancel leaves a Lease: no holder, a
// duration of one second, acquireTime and renewTime now, leaseTransitions
// kept.
func free(l *coordv1.Lease) {
	now := metav1.NowMicro()
	none := ""
	one := int32(1)
	l.Spec.HolderIdentity = &none
	l.Spec.LeaseDurationSeconds = &one
	l.Spec.AcquireTime = &now
	l.Spec.RenewTime = &now
	delete(l.Annotations, annoGrant)
	delete(l.Annotations, annoMeta)
}

// setAnnotation sets, or with an empty value removes, an annotation.
func setAnnotation(l *coordv1.Lease, key, value string) {
	if value == "" {
		delete(l.Annotations, key)
		return
	}
	if l.Annotations == nil {
		l.Annotations = make(map[string]string)
	}
	l.Annotations[key] = value
}

// newLease returns an absent Lease for name, not yet created.
func newLease(name string) *coordv1.Lease {
	l := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName(name)}}
	if l.Name != name {
		setAnnotation(l, annoName, name)
	}
	return l
}
