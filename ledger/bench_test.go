package ledger_test

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
)

// BenchmarkAdmitFinish admits and finishes a request of one key, with
// the ledger off (keystore's Admission.FinishSpend) and on (FinishWith a
// ledger entry and its rollups, in the same batch): what the ledger adds
// to a request, in the same run. With end users, each request names one:
// of 16 (a rollup of end users of 17 rows, a directory record each), or a
// new one each time (the rollup full at 256 rows, one moved into the
// other row and a directory record made by every request).
func BenchmarkAdmitFinish(b *testing.B) {
	for _, d := range []ratestore.Durability{ratestore.Sync, ratestore.Async} {
		for _, mode := range []string{"off", "on", "on-endusers16", "on-endusers-new"} {
			on := mode != "off"
			name := d.String() + "/ledger=" + mode
			b.Run(name, func(b *testing.B) {
				c := fakeclock.New(t0)
				db, err := ratestore.Open(filepath.Join(b.TempDir(), "k.db"), ratestore.Options{Durability: d, Now: c.Now})
				require.NoError(b, err)
				b.Cleanup(func() { db.Close() })
				ks, err := keystore.Open(db, keystore.Options{})
				require.NoError(b, err)
				led, err := ledger.Open(db, ledger.Options{})
				require.NoError(b, err)
				b.Cleanup(func() { led.Close(ctx) })
				k, secret, err := ks.Create(ctx, keystore.Spec{Name: "bench", Policy: keystore.Policy{
					Windows: []keystore.Window{{Limit: 1 << 40, Window: 5 * time.Hour}, {Limit: 1 << 41, Window: 7 * 24 * time.Hour}},
				}})
				require.NoError(b, err)
				entry := ledger.Entry{RequestID: "req_0123456789abcdef", Key: k.ID, Model: "gpt-4o", Route: "chat completions",
					Tokens: ledger.Tokens{Input: 30, Output: 12}, Cost: 3 * pricing.Micro, Status: 200, Latency: 800 * time.Millisecond}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					i++
					switch mode {
					case "on-endusers16":
						entry.EndUser = "u-" + strconv.Itoa(i%16)
					case "on-endusers-new":
						entry.EndUser = "u-" + strconv.Itoa(i)
					}
					a, err := ks.Admit(ctx, secret, keystore.Request{Model: "gpt-4o", Reserve: 100, Cost: 3 * pricing.Micro})
					if err != nil {
						b.Fatal(err)
					}
					if !on {
						_, err = a.FinishSpend(ctx, 42, pricing.Micro)
					} else {
						n, nerr := led.Note(entry)
						if nerr != nil {
							b.Fatal(nerr)
						}
						_, err = a.FinishWith(ctx, 42, pricing.Micro, n)
						n.Done(err)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
