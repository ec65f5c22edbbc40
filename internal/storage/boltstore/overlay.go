package boltstore

import (
	"slices"
	"strings"
)

// overlay holds the writes logged since the last checkpoint: the newest
// value of every key written, nil for a delete (a tombstone over bbolt's
// value). An empty put is a non-nil empty slice.
//
// It has two generations. m takes the writes. frozen is what a background
// checkpoint is writing into bbolt: the m of when it started, read-only
// from then on, so the checkpoint reads it (and puts its keys in order)
// without a lock and without a copy, and dropping it once bbolt holds it
// costs nothing per key. A read looks in m, then in frozen, then in bbolt.
//
// Scan and the checkpoint want the keys in order; keeping a sorted slice of
// them is enough, because keys only join m between checkpoints: new keys
// gather in added and are merged into sorted when someone asks.
type overlay struct {
	m      map[string][]byte
	sorted []string // keys of m in order, except those in added
	added  []string // keys new to m since sorted was last brought up to date
	frozen map[string][]byte
}

// set records a put (value non-nil) or a delete (value nil) in m, copying
// value. It reuses the key's previous value buffer in m when it is large
// enough: values handed out are always copies, a frozen generation's
// buffers are never m's, and nobody reads m while it is written (see
// Store's locks).
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

// get returns the newest value of key in the overlay, and whether it has
// one (a nil value with true is a delete).
func (o *overlay) get(key string) ([]byte, bool) {
	if v, ok := o.m[key]; ok {
		return v, true
	}
	v, ok := o.frozen[key]
	return v, ok
}

// keys returns m's keys in order. The slice is not modified afterwards (a
// later call builds a new one), so it stays valid.
func (o *overlay) keys() []string {
	if len(o.added) == 0 {
		return o.sorted
	}
	merged := merge(o.sorted, o.added)
	o.sorted, o.added = merged, o.added[:0]
	return merged
}

// merge returns a new slice of the keys of sorted and added, in order; it
// sorts added in place.
func merge(sorted, added []string) []string {
	slices.Sort(added)
	merged := make([]string, 0, len(sorted)+len(added))
	i, j := 0, 0
	for i < len(sorted) && j < len(added) {
		if strings.Compare(sorted[i], added[j]) < 0 {
			merged = append(merged, sorted[i])
			i++
		} else {
			merged = append(merged, added[j])
			j++
		}
	}
	return append(append(merged, sorted[i:]...), added[j:]...)
}

// valuesOf returns the values of keys in m, in the same order: m's own
// buffers.
func valuesOf(m map[string][]byte, keys []string) [][]byte {
	values := make([][]byte, len(keys))
	for i, k := range keys {
		values[i] = m[k]
	}
	return values
}

// freeze makes m the frozen generation and starts an empty one. It returns
// the frozen map, never to be written again, and its keys as sorted and
// added held them, for the checkpoint to merge (see merge) outside the
// Store's locks. There must be no frozen generation already. The caller
// holds the lock that guards the maps against Get.
func (o *overlay) freeze() (frozen map[string][]byte, sorted, added []string) {
	frozen, sorted, added = o.m, o.sorted, o.added
	o.frozen = o.m
	o.m, o.sorted, o.added = make(map[string][]byte, len(frozen)), nil, nil
	return frozen, sorted, added
}

// thaw ends the frozen generation. With written, bbolt holds it and it is
// dropped; otherwise (its checkpoint failed) its keys that m does not
// shadow move back into m, for the next checkpoint. The caller holds the
// lock that guards the maps against Get.
func (o *overlay) thaw(written bool) {
	if !written {
		for k, v := range o.frozen {
			if _, ok := o.m[k]; !ok {
				o.m[k] = v
				o.added = append(o.added, k)
			}
		}
	}
	o.frozen = nil
}

// from walks the overlay's keys from start on, in order, for Scan: m's
// and frozen's (frozenKeys, in order), each key once. It sorts added in
// place rather than merging it into sorted, unless added has grown past a
// quarter of sorted: a merge costs the whole of m, and a large m scanned
// page by page while keys are added would pay it on every page.
func (o *overlay) from(start string, frozenKeys []string) keyWalk {
	a, b := o.sorted, o.added
	if len(b) > len(a)/4 {
		a, b = o.keys(), nil
	} else {
		slices.Sort(b)
	}
	w := keyWalk{a, b, frozenKeys}
	for i, l := range w {
		n, _ := slices.BinarySearch(l, start)
		w[i] = l[n:]
	}
	return w
}

// keyWalk merges sorted lists of keys, yielding a key found in several
// once.
type keyWalk [3][]string

// peek returns the next key, or false at the end.
func (w *keyWalk) peek() (string, bool) {
	k, ok := "", false
	for _, l := range w {
		if len(l) > 0 && (!ok || l[0] < k) {
			k, ok = l[0], true
		}
	}
	return k, ok
}

// next moves past k, the key peek returned, in every list that holds it.
func (w *keyWalk) next(k string) {
	for i, l := range w {
		if len(l) > 0 && l[0] == k {
			w[i] = l[1:]
		}
	}
}

// len is the number of keys in the overlay, counting a key of both
// generations twice: what it holds in memory.
func (o *overlay) len() int { return len(o.m) + len(o.frozen) }

// reset empties m after a foreground checkpoint, which runs with no
// frozen generation. The map keeps its room (at most hardLimitFactor
// checkpoints' worth of keys), so that the next checkpoint's keys do not
// grow it again from nothing.
func (o *overlay) reset() {
	clear(o.m)
	o.sorted, o.added = nil, nil
}
