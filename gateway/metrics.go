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

// admitted notes that x was admitted, reserving x.reserve tokens.
func (m *metrics) admitted(x *exchange) {}

// handler serves the metrics in Prometheus' text exposition format.
func (m *metrics) handler() http.Handler { return http.NotFoundHandler() }

// end notes that x, a request r, ended after d.
func (m *metrics) end(r *http.Request, x *exchange, d time.Duration) {}
