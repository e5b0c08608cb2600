// Package metrics exposes the daemon in Prometheus text: workloads by
// state, restarts, health, port allocations, registry heart-beating, and
// the API's requests. Everything but the request counter is read from the
// daemon's own server.Backend at scrape time, so no number can drift from
// what `flyd status` and `flyd ps` say.
//
// It is not a place for other packages' counters: they keep their own
// state, and this package only reads it.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flyd-dev/flyd/api"
	"github.com/flyd-dev/flyd/api/server"
)

var (
	workloadsDesc  = prometheus.NewDesc("flyd_workloads", "Workloads by state.", []string{"state"}, nil)
	restartsDesc   = prometheus.NewDesc("flyd_workload_restarts_total", "Restarts of a workload by its policy.", []string{"workload"}, nil)
	healthyDesc    = prometheus.NewDesc("flyd_workload_healthy", "1 when the workload's health check passes, 0 when it fails; absent without a verdict.", []string{"workload"}, nil)
	oomDesc        = prometheus.NewDesc("flyd_workload_oom_kills_total", "Processes of a workload the memory limit's OOM killer killed, since the daemon began watching.", []string{"workload"}, nil)
	notifyDesc     = prometheus.NewDesc("flyd_workload_notify_refused_total", "Datagrams at a workload's notify socket from processes not of the workload, ignored.", []string{"workload"}, nil)
	pidsDesc       = prometheus.NewDesc("flyd_workload_pids_refusals_total", "Forks of a workload its pids limit refused, since the daemon began watching.", []string{"workload"}, nil)
	portsDesc      = prometheus.NewDesc("flyd_port_allocations", "Ports held by workloads, by network.", []string{"network"}, nil)
	regDesiredDesc = prometheus.NewDesc("flyd_registry_instances", "Registry instances that should be registered, and that are.", []string{"kind"}, nil)
	regBeatsDesc   = prometheus.NewDesc("flyd_registry_heartbeats_total", "Heartbeats sent to the registry.", nil, nil)
	regFailsDesc   = prometheus.NewDesc("flyd_registry_failures_total", "Registry requests that failed.", nil, nil)
	reachDesc      = prometheus.NewDesc("flyd_reach_refused_total", "Connections declared reach refused, by the workload that tried (from) and the endpoint it tried (to, WORKLOAD/ENDPOINT).", []string{"from", "to"}, nil)
)

// Handler serves /metrics for backend, and wraps next (the API) so that
// its requests are counted. Both share one registry.
type Handler struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
}

// New returns the metrics of a daemon whose state backend serves.
func New(backend server.Backend) *Handler {
	h := &Handler{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flyd_api_requests_total",
			Help: "API requests by route and status code.",
		}, []string{"route", "code"}),
	}
	h.reg.MustRegister(h.requests, &collector{backend: backend},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return h
}

// ServeHTTP writes the Prometheus text format.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	promhttp.HandlerFor(h.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

// Count wraps next so that each request is counted by its route pattern
// (never by its path: names would make the label set unbounded).
func (h *Handler) Count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		route := r.Pattern
		if route == "" {
			route = "other"
		}
		h.requests.WithLabelValues(route, strconv.Itoa(rec.code)).Inc()
	})
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the real writer (to flush
// streams).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// collector reads the backend at scrape time.
type collector struct{ backend server.Backend }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{workloadsDesc, restartsDesc, healthyDesc, oomDesc, pidsDesc, notifyDesc, portsDesc, regDesiredDesc, regBeatsDesc, regFailsDesc, reachDesc} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ws, err := c.backend.List(ctx); err == nil {
		byState := map[api.State]int{}
		for _, w := range ws {
			byState[w.State]++
			ch <- prometheus.MustNewConstMetric(restartsDesc, prometheus.CounterValue, float64(w.Restarts), w.Name)
			if w.NotifyRefused > 0 {
				ch <- prometheus.MustNewConstMetric(notifyDesc, prometheus.CounterValue, float64(w.NotifyRefused), w.Name)
			}
			if h := w.LimitHits; h != nil {
				ch <- prometheus.MustNewConstMetric(oomDesc, prometheus.CounterValue, float64(h.OOMKills), w.Name)
				ch <- prometheus.MustNewConstMetric(pidsDesc, prometheus.CounterValue, float64(h.PidsRefusals), w.Name)
			}
			if w.Healthy != nil {
				v := 0.0
				if *w.Healthy {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(healthyDesc, prometheus.GaugeValue, v, w.Name)
			}
		}
		for _, st := range api.States {
			ch <- prometheus.MustNewConstMetric(workloadsDesc, prometheus.GaugeValue, float64(byState[st]), string(st))
		}
	}
	if ps, err := c.backend.Ports(ctx); err == nil {
		byNet := map[string]int{}
		for _, p := range ps {
			byNet[p.Network]++
		}
		for n, v := range byNet {
			ch <- prometheus.MustNewConstMetric(portsDesc, prometheus.GaugeValue, float64(v), n)
		}
	}
	if st, err := c.backend.Status(ctx); err == nil && st.Registry.URL != "" {
		r := st.Registry
		ch <- prometheus.MustNewConstMetric(regDesiredDesc, prometheus.GaugeValue, float64(r.Desired), "desired")
		ch <- prometheus.MustNewConstMetric(regDesiredDesc, prometheus.GaugeValue, float64(r.Registered), "registered")
		ch <- prometheus.MustNewConstMetric(regDesiredDesc, prometheus.GaugeValue, float64(r.Failing), "failing")
		ch <- prometheus.MustNewConstMetric(regBeatsDesc, prometheus.CounterValue, float64(r.Heartbeats))
		ch <- prometheus.MustNewConstMetric(regFailsDesc, prometheus.CounterValue, float64(r.Failures))
	}
	if src, ok := c.backend.(server.ReachSource); ok {
		if eps, err := src.Reach(ctx, ""); err == nil {
			for _, e := range eps {
				for _, r := range e.Refused {
					ch <- prometheus.MustNewConstMetric(reachDesc, prometheus.CounterValue, float64(r.Count), r.Workload, e.Workload+"/"+e.Endpoint)
				}
			}
		}
	}
}
