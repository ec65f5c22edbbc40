package gateway

import (
	"net/http"
	"time"
)

// metrics are the gateway's Prometheus metrics.
type metrics struct{}

func newMetrics() *metrics { return &metrics{} }

// begin notes that x has started.
func (m *metrics) begin(x *exchange) {}

// end notes that x, a request r, ended after d.
func (m *metrics) end(r *http.Request, x *exchange, d time.Duration) {}
