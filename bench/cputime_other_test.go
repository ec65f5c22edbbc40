//go:build !unix

package bench

// cpuTime is 0 where getrusage is missing: cpu-ns/key then reads 0.
func cpuTime() int64 { return 0 }
