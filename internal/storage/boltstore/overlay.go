package boltstore

import (
	"bytes"
	"slices"
	"strings"
	"sync"
)

// overlay holds the writes logged since the last checkpoint: the newest
// value of every key written, nil for a delete (a tombstone over bbolt's
// value). An empty put is a non-nil empty slice.
//
// Scan and the checkpoint want the keys in order; keeping a sorted slice of
// them is enough, because keys only join the overlay between checkpoints:
// new keys gather in added and are merged into sorted when someone asks.
type overlay struct {
	m      map[string][]byte
	sorted []string // keys of m in order, except those in added
	added  []string // keys new to m since sorted was last brought up to date
}

// set records a put (value non-nil) or a delete (value nil), copying value.
// It reuses the key's previous value buffer when it is large enough: values
// handed out are always copies, and nobody reads the overlay while it is
// written (see Store's locks).
func (o *overlay) set(key, value []byte) {
	old, ok := o.m[string(key)]
	var v []byte
	switch {
	case value == nil:
	case old != nil && cap(old) >= len(value):
		v = append(old[:0], value...)
	default:
		v = append(make([]byte, 0, len(value)), value...)
	}
	if ok {
		o.m[string(key)] = v
		return
	}
	if o.m == nil {
		o.m = make(map[string][]byte)
	}
	k := string(key)
	o.m[k] = v
	o.added = append(o.added, k)
}

// keys returns the overlay's keys in order. The slice is not modified
// afterwards (a later call builds a new one), so it stays valid.
func (o *overlay) keys() []string {
	if len(o.added) == 0 {
		return o.sorted
	}
	slices.Sort(o.added)
	merged := make([]string, 0, len(o.sorted)+len(o.added))
	i, j := 0, 0
	for i < len(o.sorted) && j < len(o.added) {
		if strings.Compare(o.sorted[i], o.added[j]) < 0 {
			merged = append(merged, o.sorted[i])
			i++
		} else {
			merged = append(merged, o.added[j])
			j++
		}
	}
	merged = append(append(merged, o.sorted[i:]...), o.added[j:]...)
	o.sorted, o.added = merged, o.added[:0]
	return merged
}

// from walks the overlay's keys from start on, in order, for Scan. It
// sorts added in place rather than merging it into sorted, unless added
// has grown past a quarter of sorted: a merge costs the whole overlay, and
// a large overlay scanned page by page while keys are added would pay it
// on every page.
func (o *overlay) from(start string) keyWalk {
	a, b := o.sorted, o.added
	if len(b) > len(a)/4 {
		a, b = o.keys(), nil
	} else {
		slices.Sort(b)
	}
	i, _ := slices.BinarySearch(a, start)
	j, _ := slices.BinarySearch(b, start)
	return keyWalk{a[i:], b[j:]}
}

// keyWalk merges two sorted lists of distinct keys (sorted and added).
type keyWalk struct{ a, b []string }

// firstA reports whether the next key is a's.
func (w *keyWalk) firstA() bool { return len(w.b) == 0 || len(w.a) > 0 && w.a[0] < w.b[0] }

// peek returns the next key, or false at the end.
func (w *keyWalk) peek() (string, bool) {
	switch {
	case len(w.a) == 0 && len(w.b) == 0:
		return "", false
	case w.firstA():
		return w.a[0], true
	}
	return w.b[0], true
}

// next moves past the next key.
func (w *keyWalk) next() {
	if w.firstA() {
		w.a = w.a[1:]
	} else {
		w.b = w.b[1:]
	}
}

// len is the number of keys in the overlay.
func (o *overlay) len() int { return len(o.m) }

// reset empties the overlay after a checkpoint. The map keeps its room
// (at most hardLimitFactor checkpoints' worth of keys), so that the next
// checkpoint's keys do not grow it again from nothing.
func (o *overlay) reset() {
	clear(o.m)
	o.sorted, o.added = nil, nil
}

// snapshot returns the overlay's keys in order and their values (nil: a
// delete). With clone false the values are the overlay's own buffers,
// which the next set may overwrite; with clone true they are copies in one
// allocation, for a checkpoint that runs while sets go on.
func (o *overlay) snapshot(clone bool) (keys []string, values [][]byte) {
	keys = o.keys()
	values = make([][]byte, len(keys))
	var arena []byte
	if clone {
		n := 0
		for _, k := range keys {
			n += len(o.m[k])
		}
		arena = make([]byte, 0, n)
	}
	for i, k := range keys {
		v := o.m[k]
		if clone && v != nil {
			start := len(arena)
			arena = append(arena, v...)
			v = arena[start:len(arena):len(arena)] // non-nil, even empty
		}
		values[i] = v
	}
	return keys, values
}

// dropWritten removes the keys that still hold the value a checkpoint
// wrote (values[i] for keys[i]), now that bbolt holds it: a key set again
// since keeps its newer value, which the next checkpoint writes. A key set
// again to the same value may go too, as bbolt holds that value. mu is
// the lock that guards m against Get, taken for a bounded number of keys
// at a time so that Gets are not held up by a large checkpoint.
func (o *overlay) dropWritten(mu *sync.RWMutex, keys []string, values [][]byte) {
	const step = 4096
	for start := 0; start < len(keys); start += step {
		mu.Lock()
		for i := start; i < min(start+step, len(keys)); i++ {
			if v, ok := o.m[keys[i]]; ok && (v == nil) == (values[i] == nil) && bytes.Equal(v, values[i]) {
				delete(o.m, keys[i])
			}
		}
		mu.Unlock()
	}
	kept := make([]string, 0, len(o.m))
	for _, k := range o.keys() {
		if _, ok := o.m[k]; ok {
			kept = append(kept, k)
		}
	}
	o.sorted = kept
}
