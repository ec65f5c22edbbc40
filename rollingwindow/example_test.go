package rollingwindow_test

import (
	"fmt"
	"log"
	"time"

	"github.com/ratestore/ratestore/rollingwindow"
)

// Usage over the last hour, in 10-minute buckets: what was added at 12:00
// counts until 13:00, what was added at 12:25 (the 12:20 bucket) until
// 13:20. Instants are Unix nanoseconds.
func Example() {
	s, err := rollingwindow.New(rollingwindow.Config{Window: time.Hour, Bucket: 10 * time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	at := func(hhmm string) int64 {
		t, err := time.Parse("2006-01-02 15:04", "2026-01-18 "+hhmm)
		if err != nil {
			log.Fatal(err)
		}
		return t.UnixNano()
	}
	s.Add(at("12:00"), 30)
	s.Add(at("12:25"), 12)
	for _, t := range []string{"12:30", "13:00", "13:20"} {
		fmt.Println(t, s.Used(at(t)))
	}
	// Output:
	// 12:30 42
	// 13:00 12
	// 13:20 0
}
