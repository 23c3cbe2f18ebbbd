package node

import (
	"fmt"
	"net/http"
	"net/http/pprof"
)

// The HTTP health endpoints, for process supervisors and test harnesses:
//
//	GET /healthz  200 "ok" while the process serves HTTP at all.
//	GET /readyz   200 "ready" once the node serves its partitions
//	              (Node.Ready), else 503 with the reason.
//	GET /metrics  Prometheus metrics (metrics.go).
//
// The HTTP/JSON API (internal/httpapi) is mounted beside them. The three
// are open unless HTTPConfig.ProtectMetricsAndHealth, which has the API
// guard them: /metrics and /readyz need credentials and DESCRIBE on the
// cluster; /healthz credentials only (httpapi.API.ProtectLiveness), so
// that a liveness probe is not answered 503 while the authorizer catches
// up after a restart, which would have the node restarted again.
func (n *Node) httpHandler() http.Handler {
	mux := http.NewServeMux()
	handle, handleLiveness := mux.Handle, mux.Handle
	if n.api != nil {
		n.api.Register(mux)
		if n.cfg.HTTP.ProtectMetricsAndHealth {
			handle = func(pattern string, h http.Handler) { mux.Handle(pattern, n.api.Protect(pattern, h)) }
			handleLiveness = func(pattern string, h http.Handler) { mux.Handle(pattern, n.api.ProtectLiveness(pattern, h)) }
		}
	}
	if n.metrics != nil {
		handle("GET /metrics", metricsHandler(n.metrics, &n.metricsText))
	}
	handleLiveness("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	}))
	handle("GET /readyz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := n.Ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready:", err)
			return
		}
		fmt.Fprintln(w, "ready")
	}))
	return mux
}

// pprofHandler serves Go's profiling endpoints under /debug/pprof/ on a
// mux of its own: importing net/http/pprof also registers them on
// http.DefaultServeMux, which the node never serves.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
