package legacy

import (
	"bytes"
	"testing"
)

// BenchmarkParseLegacy100kWindows parses a file of one key with 100k usage
// windows (about 7 MB pretty-printed).
func BenchmarkParseLegacy100kWindows(b *testing.B) {
	data := genFile(100_000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		keys, _, err := Parse(bytes.NewReader(data))
		if err != nil || len(keys[0].Windows) != 100_000 {
			b.Fatal(err)
		}
	}
}
