package dlockotel

import (
	"maps"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/dlock-go/dlock/hook"
)

// Metric attribute keys (see the metric table in dlock's README).
const (
	keyBackend = attribute.Key("backend")
	keyOutcome = attribute.Key("outcome")
	keyReason  = attribute.Key("reason")
	keyName    = attribute.Key("name")
)

// maxNames bounds how many mapped lock names each backend's cache keeps;
// the attribute sets of further names are built for each event.
const maxNames = 1000

// measure is one attribute set, made into the options the instruments
// take, so that recording allocates nothing for it.
type measure struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newMeasure(kvs ...attribute.KeyValue) measure {
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return measure{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}}
}

// lockAttrs holds the attribute sets of the per-lock metrics of one
// backend and, with WithLockName, one mapped name.
type lockAttrs struct {
	kvs      []attribute.KeyValue // backend, and name if any
	base     measure
	acquires [4]measure // by hook.AcquireOutcome
	releases [3]measure // by hook.ReleaseOutcome
	losses   [3]measure // by hook.LossReason
}

func newLockAttrs(kvs ...attribute.KeyValue) *lockAttrs {
	a := &lockAttrs{kvs: kvs, base: newMeasure(kvs...)}
	for i := range a.acquires {
		a.acquires[i] = a.with(keyOutcome, hook.AcquireOutcome(i).String())
	}
	for i := range a.releases {
		a.releases[i] = a.with(keyOutcome, hook.ReleaseOutcome(i).String())
	}
	for i := range a.losses {
		a.losses[i] = a.with(keyReason, hook.LossReason(i).String())
	}
	return a
}

// with returns the set of a's attributes and k = v.
func (a *lockAttrs) with(k attribute.Key, v string) measure {
	kvs := append(a.kvs[:len(a.kvs):len(a.kvs)], k.String(v))
	return newMeasure(kvs...)
}

func (a *lockAttrs) acquire(o hook.AcquireOutcome) measure {
	if o >= 0 && int(o) < len(a.acquires) {
		return a.acquires[o]
	}
	return a.with(keyOutcome, o.String())
}

func (a *lockAttrs) release(o hook.ReleaseOutcome) measure {
	if o >= 0 && int(o) < len(a.releases) {
		return a.releases[o]
	}
	return a.with(keyOutcome, o.String())
}

func (a *lockAttrs) loss(r hook.LossReason) measure {
	if r >= 0 && int(r) < len(a.losses) {
		return a.losses[r]
	}
	return a.with(keyReason, r.String())
}

// Renewal outcomes, the indexes of backendAttrs.renewals.
const (
	renewRenewed = iota
	renewNotHeld
	renewFailed
)

// backendAttrs holds the attribute sets of one backend.
type backendAttrs struct {
	backend  string
	lock     *lockAttrs // without a name
	renewals [3]measure // backend, outcome: renewed, not_held, failed

	mu    sync.RWMutex
	named map[string]*lockAttrs // by mapped name, at most maxNames
}

func newBackendAttrs(backend string) *backendAttrs {
	b := &backendAttrs{backend: backend, lock: newLockAttrs(keyBackend.String(backend)),
		named: make(map[string]*lockAttrs)}
	for i, o := range [...]string{renewRenewed: "renewed", renewNotHeld: "not_held", renewFailed: "failed"} {
		b.renewals[i] = b.lock.with(keyOutcome, o)
	}
	return b
}

// forName returns the sets of the per-lock metrics of the mapped name.
func (b *backendAttrs) forName(name string) *lockAttrs {
	b.mu.RLock()
	a := b.named[name]
	b.mu.RUnlock()
	if a != nil {
		return a
	}
	a = newLockAttrs(keyBackend.String(b.backend), keyName.String(name))
	b.mu.Lock()
	defer b.mu.Unlock()
	if old := b.named[name]; old != nil {
		return old
	}
	if len(b.named) < maxNames {
		b.named[name] = a
	}
	return a
}

// attrCache holds the attribute sets of every backend a hook has seen.
// A hook usually serves one backend: lookups are one atomic load and a
// search of a map that only grows, copied on write.
type attrCache struct {
	mu       sync.Mutex // serializes writers of backends
	backends atomic.Pointer[map[string]*backendAttrs]
}

func newAttrCache() *attrCache {
	c := &attrCache{}
	c.backends.Store(&map[string]*backendAttrs{})
	return c
}

// backend returns the sets of the named backend.
func (c *attrCache) backend(name string) *backendAttrs {
	if b := (*c.backends.Load())[name]; b != nil {
		return b
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.backends.Load()
	if b := old[name]; b != nil {
		return b
	}
	b := newBackendAttrs(name)
	m := maps.Clone(old)
	m[name] = b
	c.backends.Store(&m)
	return b
}
