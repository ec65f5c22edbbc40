package boltstore

import (
	"slices"
	"strings"
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

// len is the number of keys in the overlay.
func (o *overlay) len() int { return len(o.m) }

// reset empties the overlay after a checkpoint.
func (o *overlay) reset() {
	o.m, o.sorted, o.added = nil, nil, nil
}
