package metrics

import (
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/fsm"
	"github.com/tenure-go/tenure/lifecycle"
)

// Metrics is a Prometheus collector of the elector's events. Make it with
// New; it is safe for concurrent use.
type Metrics struct {
	clock clock.Clock

	leader      *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	won         *prometheus.CounterVec
	lost        *prometheus.CounterVec
	renew       *prometheus.HistogramVec
	renewFailed *prometheus.CounterVec
	demotions   *prometheus.CounterVec
	duplicates  *prometheus.CounterVec
	panics      *prometheus.CounterVec
	remaining   *prometheus.Desc
	info        *prometheus.Desc

	mu    sync.Mutex
	terms map[string][]*leading // guarded by mu: per key, one per Trace call
}

// leading is what one traced Elector last reported about its term.
type leading struct {
	leader     bool      // Metrics.mu: the state is leader
	deadline   time.Time // Metrics.mu: the last deadline reported; zero if none yet in this state
	advertised string    // Metrics.mu: the value the holder advertises, from its last term
}

// Option configures New.
type Option func(*Metrics)

// WithClock sets the clock tenure_deadline_remaining_seconds is read
// against; it must be the electors' Config.Clock. The default is the real
// clock.
func WithClock(c clock.Clock) Option { return func(m *Metrics) { m.clock = c } }

// Buckets are the upper bounds, in seconds, of
// tenure_renew_duration_seconds.
var Buckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// New makes a Metrics and registers it with reg, unless reg is nil.
// Registering twice with one registry fails: use one Metrics per registry
// for all electors.
func New(reg prometheus.Registerer, opts ...Option) (*Metrics, error) {
	m := &Metrics{
		clock: clock.New(),
		terms: map[string][]*leading{},
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tenure_leader",
			Help: "Electors of this process that lead the key (1 while one leads).",
		}, []string{"key"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_state_transitions_total",
			Help: "Lifecycle state transitions.",
		}, []string{"key", "from", "to"}),
		won: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_elections_won_total",
			Help: "Attempts that took the claim.",
		}, []string{"key"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_elections_lost_total",
			Help: "Attempts that did not take the claim, by error class (lost: another holder has it).",
		}, []string{"key", "class"}),
		renew: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tenure_renew_duration_seconds",
			Help:    "Round trip of renewals, answered or failed.",
			Buckets: Buckets,
		}, []string{"key"}),
		renewFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_renew_failures_total",
			Help: "Failed renewals, by error class.",
		}, []string{"key", "class"}),
		demotions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_demotions_total",
			Help: "Terms ended, by reason.",
		}, []string{"key", "reason"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_duplicate_identities_total",
			Help: "Other holders seen holding the claim with this elector's identity.",
		}, []string{"key"}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_panics_total",
			Help: "Panics recovered by the elector, by where they happened.",
		}, []string{"key", "where"}),
		remaining: prometheus.NewDesc("tenure_deadline_remaining_seconds",
			"Time from the scrape to the local deadline of the term this process leads; negative once past it.",
			[]string{"key"}, nil),
		info: prometheus.NewDesc("tenure_leader_info",
			"Electors of this process leading the key, by the value their holder advertises (elector.Config.Advertise; empty if none).",
			[]string{"key", "advertised"}, nil),
	}
	for _, o := range opts {
		o(m)
	}
	if reg != nil {
		if err := reg.Register(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) vecs() []prometheus.Collector {
	return []prometheus.Collector{m.leader, m.transitions, m.won, m.lost, m.renew, m.renewFailed, m.demotions, m.duplicates, m.panics}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.vecs() {
		c.Describe(ch)
	}
	ch <- m.remaining
	ch <- m.info
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.vecs() {
		c.Collect(ch)
	}
	now := m.clock.Now()
	m.mu.Lock()
	var out []prometheus.Metric
	for key, ls := range m.terms {
		var first time.Time
		leading := map[string]int{} // by advertised value
		for _, l := range ls {
			if l.leader && !l.deadline.IsZero() && (first.IsZero() || l.deadline.Before(first)) {
				first = l.deadline
			}
			if l.leader && !l.deadline.IsZero() {
				leading[l.advertised]++
			}
		}
		for adv, n := range leading {
			out = append(out, prometheus.MustNewConstMetric(m.info, prometheus.GaugeValue, float64(n), key, adv))
		}
		if !first.IsZero() {
			out = append(out, prometheus.MustNewConstMetric(m.remaining, prometheus.GaugeValue, first.Sub(now).Seconds(), key))
		}
	}
	m.mu.Unlock()
	for _, o := range out {
		ch <- o
	}
}

// classes, reasons and wheres are the label values set to zero up front;
// the transitions are the lifecycle's table.
var (
	classes = []backends.Class{backends.ClassLost, backends.ClassTransient, backends.ClassFatal}
	reasons = []elector.Reason{elector.ReasonStopped, elector.ReasonLost, elector.ReasonExpired, elector.ReasonFatal, elector.ReasonPanic}
	// wheres are the places the elector recovers panics in
	// (elector.PanicError.Where); one it adds later starts at its first
	// panic until it is listed here.
	wheres = []string{"loop", "deadline timer", "Release", "OnElected", "OnDemoted", "OnNewLeader"}
)

// Trace returns the hooks that feed key's series; set them as the Config.Trace
// of the Elector whose Config.Key is key (for a slot group, the group's key).
func (m *Metrics) Trace(key string) elector.Trace {
	l := &leading{}
	m.mu.Lock()
	m.terms[key] = append(m.terms[key], l)
	m.mu.Unlock()

	leader := m.leader.WithLabelValues(key)
	won := m.won.WithLabelValues(key)
	renew := m.renew.WithLabelValues(key)
	duplicates := m.duplicates.WithLabelValues(key)
	for _, c := range classes {
		m.lost.WithLabelValues(key, c.String())
		m.renewFailed.WithLabelValues(key, c.String())
	}
	for _, r := range reasons {
		m.demotions.WithLabelValues(key, r.String())
	}
	for _, w := range wheres {
		m.panics.WithLabelValues(key, w)
	}
	for _, tr := range fsm.Table() {
		for _, from := range tr.From {
			m.transitions.WithLabelValues(key, from.String(), tr.To.String())
		}
	}
	setDeadline := func(d time.Time) {
		m.mu.Lock()
		if l.leader {
			l.deadline = d
		}
		m.mu.Unlock()
	}
	return elector.Trace{
		StateChanged: func(from, to lifecycle.State) {
			m.transitions.WithLabelValues(key, from.String(), to.String()).Inc()
			if to == lifecycle.Leader {
				leader.Inc()
			}
			if from == lifecycle.Leader {
				leader.Dec()
			}
			m.mu.Lock()
			l.leader = to == lifecycle.Leader
			l.deadline = time.Time{}
			m.mu.Unlock()
		},
		ElectionWon: func(term elector.Term, _ time.Duration) {
			won.Inc()
			m.mu.Lock()
			l.advertised = term.Holder.Advertised
			m.mu.Unlock()
			setDeadline(term.Deadline)
		},
		ElectionLost: func(class backends.Class, _ time.Duration) {
			m.lost.WithLabelValues(key, class.String()).Inc()
		},
		Renewed: func(term elector.Term, latency, _ time.Duration) {
			renew.Observe(latency.Seconds())
			setDeadline(term.Deadline)
		},
		RenewFailed: func(_ elector.Term, class backends.Class, latency, _ time.Duration) {
			renew.Observe(latency.Seconds())
			m.renewFailed.WithLabelValues(key, class.String()).Inc()
		},
		Demoted: func(_ elector.Term, cause elector.Cause) {
			m.demotions.WithLabelValues(key, cause.Reason.String()).Inc()
		},
		DuplicateIdentity: func(backends.Holder) { duplicates.Inc() },
		Panicked: func(where string) {
			m.panics.WithLabelValues(key, where).Inc()
		},
	}
}
