package timeline

import (
	"bufio"
	"cmp"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tenure-go/tenure/tests/chaos/check"
	"github.com/tenure-go/tenure/tests/chaos/journal"
	"github.com/tenure-go/tenure/tests/chaos/schedule"
)

// The timeline is the picture of a run, drawn from its journal alone: one
// lane per worker, with its terms as bars (from OnElected to OnDemoted,
// labelled by token and slot, the span in which it acted drawn darker
// inside), its acts as ticks above them and the fenced resource's accepts
// below, each rejected write as a cross linked to the act it came from,
// the worker's processes as a thin line (a kill ends one, a restart begins
// the next), and the faults that hit it as shaded spans; then one lane per
// server the faults paused, killed or isolated. A failing run lists its
// violations on top.
//
// Every label that comes from the journal (worker names, fault targets,
// demotion causes, violations) is escaped as XML text: a worker may be
// named anything. Every term and every fault of the journal is one <g>
// element carrying data- attributes that name it (data-worker, data-pid,
// data-token, data-slot; data-fault, data-kind, data-target) and a <title>
// that a browser shows on hover, so the picture can be checked by a
// program and read by a person.

// File is the name of a run's timeline in its directory.
const File = "timeline.svg"

// tlTerm is one term of one worker process: what the picture draws as a
// bar.
type tlTerm struct {
	check.TermKey
	from, to          int64
	end               string // OnDemoted's cause, or why the bar ends without one
	granted           bool   // false: acts with a token OnElected never gave
	firstAct, lastAct int64  // 0 when it never acted
	acts, accepts     []int64
	rejects           []journal.Record
	band              int
}

// extent is where the term's drawing ends: a broken worker may act after
// its term ended.
func (t *tlTerm) extent() int64 { return max(t.to, t.lastAct) }

// tlFault is one fault of the schedule as the driver journaled it.
type tlFault struct {
	n            int
	kind, target string
	from, to     int64
	healed       bool
	skipped      string // why the driver did not apply it; "" when it did
}

// tlProc is one worker process, from its start to its last record, or to
// the SIGKILL or SIGTERM that ended it.
type tlProc struct {
	pid      int
	from, to int64
	killed   bool // by SIGKILL, at to
	termed   bool // told to stop by SIGTERM at to; it exited soon after
}

type tlLane struct {
	name    string
	server  bool
	terms   []*tlTerm
	faults  []*tlFault
	procs   []*tlProc
	orphans []journal.Record // accepts and rejects of no term the journal shows
	bands   int
}

// tlOverlap is a span in which terms acted at once that must not: two on
// one slot, or more than the slots there are.
type tlOverlap struct {
	from, to int64
	what     string
}

// timeline is a run's journal arranged for drawing.
type timeline struct {
	spec     journal.RunSpec
	res      check.Result
	t0, t1   int64 // the run's begin and end
	lanes    []*tlLane
	skipped  []*tlFault
	overlaps []tlOverlap
}

// buildTimeline arranges recs, the journal of the run spec describes, for
// drawing; res is what the checker found in it.
func buildTimeline(recs []journal.Record, spec journal.RunSpec, res check.Result) *timeline {
	tl := &timeline{spec: spec, res: res}
	tl.t0, tl.t1 = runSpan(recs)
	tb := &tlBuild{tl: tl, lanes: map[string]*tlLane{}, procs: map[tlProcKey]*tlProc{}}
	// Worker lanes first: a fault's target is a server only if no worker
	// has its name.
	for _, r := range recs {
		if r.Worker != "" {
			tb.lane(r.Worker, false)
		}
	}
	tb.processes(recs)
	tb.faults(recs)
	tb.terms(recs)
	tb.bands()
	tl.overlaps = overlaps(tl.lanes, max(spec.Slots, 1))
	return tl
}

// runSpan is when the run began and ended: the span of its records, or
// exactly the driver's begin and end records in a journal that has them.
func runSpan(recs []journal.Record) (t0, t1 int64) {
	for i, r := range recs {
		if i == 0 {
			t0, t1 = r.T, r.T
		}
		t0, t1 = min(t0, r.T), max(t1, r.T)
	}
	for _, r := range recs {
		switch r.Ev {
		case journal.EvBegin:
			t0 = r.T
		case journal.EvEnd:
			t1 = r.T
		}
	}
	if t1 <= t0 {
		t1 = t0 + int64(time.Second)
	}
	return t0, t1
}

// tlProcKey names a process of a worker.
type tlProcKey struct {
	worker string
	pid    int
}

// tlBuild is a timeline being built from a journal's records.
type tlBuild struct {
	tl    *timeline
	lanes map[string]*tlLane
	procs map[tlProcKey]*tlProc
}

// lane returns the lane of name, made a server's lane if it is new and
// server is true.
func (tb *tlBuild) lane(name string, server bool) *tlLane {
	l := tb.lanes[name]
	if l == nil {
		l = &tlLane{name: name, server: server}
		tb.lanes[name] = l
	}
	return l
}

// processes puts each worker's processes on its lane, in the order they
// started, spanning the records they journaled.
func (tb *tlBuild) processes(recs []journal.Record) {
	for _, r := range recs {
		if r.Worker == "" || r.PID == 0 {
			continue
		}
		k := tlProcKey{r.Worker, r.PID}
		p := tb.procs[k]
		if p == nil {
			p = &tlProc{pid: r.PID, from: r.T, to: r.T}
			tb.procs[k] = p
			tb.lanes[r.Worker].procs = append(tb.lanes[r.Worker].procs, p)
		}
		p.from, p.to = min(p.from, r.T), max(p.to, r.T)
	}
	for _, l := range tb.lanes {
		slices.SortStableFunc(l.procs, func(a, b *tlProc) int { return cmp.Compare(a.from, b.from) })
	}
}

// faults puts each fault on its target's lane, from its injection to its
// heal: a SIGKILL or SIGTERM ends the process it hit; the last process of
// a worker that neither ended ran until the end of the run.
func (tb *tlBuild) faults(recs []journal.Record) {
	tl := tb.tl
	faults := map[int]*tlFault{}
	for _, r := range recs {
		switch r.Ev {
		case journal.EvFault:
			f := &tlFault{n: r.Fault, kind: r.Kind, target: r.Target, from: r.T, to: tl.t1}
			if r.Target == "" {
				f.skipped = r.Reason
				if f.skipped == "" {
					f.skipped = "not applied"
				}
				tl.skipped = append(tl.skipped, f)
				continue
			}
			faults[r.Fault] = f
			l := tb.lane(r.Target, true)
			l.faults = append(l.faults, f)
			// A process hit by SIGKILL or SIGTERM lived until then, though
			// a follower may have journaled nothing for a while before.
			if (r.Kind == schedule.FKill || r.Kind == schedule.FTerm) && !l.server {
				l.hit(r.T, r.Kind)
			}
		case journal.EvHeal:
			if f := faults[r.Fault]; f != nil && !f.healed {
				f.to, f.healed = max(r.T, f.from), true
			}
		}
	}
	for _, l := range tb.lanes {
		if n := len(l.procs); n > 0 && !l.procs[n-1].killed && !l.procs[n-1].termed {
			l.procs[n-1].to = tl.t1
		}
	}
}

// hit records that a SIGKILL or SIGTERM (kind) at t ended the lane's
// latest process started by then.
func (l *tlLane) hit(t int64, kind string) {
	var hit *tlProc
	for _, p := range l.procs {
		if p.from <= t {
			hit = p
		}
	}
	if hit != nil {
		hit.to = max(hit.to, t)
		hit.killed, hit.termed = kind == schedule.FKill, kind == schedule.FTerm
	}
}

// terms puts the terms on their workers' lanes, in journal order:
// OnElected opens one, OnDemoted closes it, and an act belongs to the
// latest term of its key, even a closed one. A term still open at the end
// ends with its process, or with the run.
func (tb *tlBuild) terms(recs []journal.Record) {
	latest := map[check.TermKey]*tlTerm{}
	open := map[check.TermKey]*tlTerm{}
	for _, r := range recs {
		k := check.TermKey{Worker: r.Worker, PID: r.PID, Tok: r.Tok, Slot: r.Slot}
		switch r.Ev {
		case journal.EvElected:
			t := &tlTerm{TermKey: k, from: r.T, to: -1, granted: true}
			latest[k], open[k] = t, t
			tb.lanes[r.Worker].terms = append(tb.lanes[r.Worker].terms, t)
		case journal.EvDemoted:
			if t := open[k]; t != nil {
				t.to, t.end = max(r.T, t.from), r.Reason
				delete(open, k)
			}
		case journal.EvAct:
			t := latest[k]
			if t == nil {
				t = &tlTerm{TermKey: k, from: r.T, to: r.T, end: "never granted"}
				latest[k] = t
				tb.lanes[r.Worker].terms = append(tb.lanes[r.Worker].terms, t)
			}
			t.act(r.T)
		case journal.EvAccept, journal.EvReject:
			t := latest[k]
			if t == nil {
				tb.lanes[r.Worker].orphans = append(tb.lanes[r.Worker].orphans, r)
				continue
			}
			if r.Ev == journal.EvAccept {
				t.accepts = append(t.accepts, r.T)
			} else {
				t.rejects = append(t.rejects, r)
			}
		}
	}
	for k, t := range open {
		t.to, t.end = tb.tl.t1, "no OnDemoted before the run ended"
		if p := tb.procs[tlProcKey{k.Worker, k.PID}]; p != nil {
			t.to = max(p.to, t.from)
			if p.killed {
				t.end = "killed"
			} else if p.to < tb.tl.t1 {
				t.end = "process ended without OnDemoted"
			}
		}
	}
}

// act records an act of the term at t; a term never granted spans its
// acts.
func (t *tlTerm) act(at int64) {
	if len(t.acts) == 0 {
		t.firstAct, t.lastAct = at, at
	}
	t.firstAct, t.lastAct = min(t.firstAct, at), max(t.lastAct, at)
	t.acts = append(t.acts, at)
	if !t.granted {
		t.from, t.to = t.firstAct, t.lastAct
	}
}

// bands puts the terms of one lane that overlap (a broken worker, or a
// worker on several slots) on bands of their own, and orders the lanes:
// workers before servers, w2 before w10.
func (tb *tlBuild) bands() {
	tl := tb.tl
	for _, l := range tb.lanes {
		slices.SortStableFunc(l.terms, func(a, b *tlTerm) int { return cmp.Compare(a.from, b.from) })
		var ends []int64 // band -> where its last term's drawing ends
		for _, t := range l.terms {
			t.band = -1
			for b, e := range ends {
				if e < t.from {
					t.band = b
					break
				}
			}
			if t.band < 0 {
				t.band = len(ends)
				ends = append(ends, 0)
			}
			ends[t.band] = t.extent()
		}
		l.bands = max(1, len(ends))
		tl.lanes = append(tl.lanes, l)
	}
	slices.SortFunc(tl.lanes, func(a, b *tlLane) int {
		if a.server != b.server {
			if a.server {
				return 1
			}
			return -1
		}
		// w2 before w10.
		return cmp.Or(cmp.Compare(len(a.name), len(b.name)), strings.Compare(a.name, b.name))
	})
}

// overlaps finds where terms acted at once, by the spans between their
// first and last acts, as the checker judges them: two terms of one slot,
// or, where that does not already say it, more than n terms.
func overlaps(lanes []*tlLane, n int) []tlOverlap {
	var acted []*tlTerm
	for _, l := range lanes {
		for _, t := range l.terms {
			if len(t.acts) > 0 {
				acted = append(acted, t)
			}
		}
	}
	slices.SortStableFunc(acted, func(a, b *tlTerm) int { return cmp.Compare(a.firstAct, b.firstAct) })
	name := func(t *tlTerm) string { return fmt.Sprintf("%s (pid %d, token %d)", t.Worker, t.PID, t.Tok) }
	var out []tlOverlap
	covered := func(from, to int64) bool {
		for _, o := range out {
			if o.from <= from && to <= o.to {
				return true
			}
		}
		return false
	}
	for i, a := range acted {
		for _, b := range acted[i+1:] {
			from, to := max(a.firstAct, b.firstAct), min(a.lastAct, b.lastAct)
			if a.Slot == b.Slot && from <= to {
				out = append(out, tlOverlap{from, to, fmt.Sprintf("slot %d: %s and %s acted at once", a.Slot, name(a), name(b))})
			}
		}
	}
	type edge struct {
		t     int64
		delta int
	}
	var edges []edge
	for _, t := range acted {
		edges = append(edges, edge{t.firstAct, 1}, edge{t.lastAct, -1})
	}
	// A term that begins where another ends overlaps it, as the
	// checker counts.
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(b.delta, a.delta)) })
	count, peak, from := 0, 0, int64(0)
	for _, e := range edges {
		count += e.delta
		switch {
		case e.delta > 0 && count == n+1:
			from, peak = e.t, count
		case e.delta > 0 && count > n:
			peak = max(peak, count)
		case e.delta < 0 && count == n && !covered(from, e.t):
			out = append(out, tlOverlap{from, e.t, fmt.Sprintf("%d terms acted at once (at most %d)", peak, n)})
		}
	}
	return out
}

// Write writes the timeline of a run to path.
func Write(path string, recs []journal.Record, spec journal.RunSpec, res check.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("chaos: timeline: %w", err)
	}
	w := bufio.NewWriter(f)
	buildTimeline(recs, spec, res).writeSVG(w)
	err = w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("chaos: timeline: %w", err)
	}
	return nil
}

// Layout, in pixels.
const (
	tlWidth    = 1400
	tlLeft     = 130 // lane labels
	tlRight    = 30
	tlBandH    = 38 // one band of terms
	tlStripH   = 16 // under the bands: fault labels and the process line
	tlMaxNotes = 8  // violations listed in the header
)

// faultStyle is the fill of each fault kind; kinds not listed (a journal
// from a newer driver) are drawn grey.
var faultStyle = map[string]string{
	schedule.FKill:         "#e06666",
	schedule.FTerm:         "#f6b26b",
	schedule.FStopShort:    "#b4a7d6",
	schedule.FStopLong:     "#8e7cc3",
	schedule.FStopFollower: "#d5a6bd",
	schedule.FLatency:      "#ffd966",
	schedule.FPartition:    "#6fa8dc",
	schedule.FServerPause:  "#a64d79",
	schedule.FServerKill:   "#cc0000",
	schedule.FIsolate:      "#45818e",
}

// slotColor is the colour of the bars of a slot.
func slotColor(slot int) string {
	p := [...]string{"#3d85c6", "#6aa84f", "#e69138", "#a64d79", "#45818e", "#bf9000", "#674ea7", "#85200c"}
	return p[((slot%len(p))+len(p))%len(p)]
}

// svgw writes SVG. Every string from the journal goes through esc.
type svgw struct {
	w   io.Writer
	err error
}

func (s *svgw) printf(format string, args ...any) {
	if s.err == nil {
		_, s.err = fmt.Fprintf(s.w, format, args...)
	}
}

// esc escapes s as XML character data or an attribute value (quotes
// included); bytes that are not valid UTF-8 or not XML characters become
// U+FFFD.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// clip shortens s to n runes for a label; the <title> keeps it whole.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func px(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// fits reports whether a label of s at about 6 px a character fits in w.
func fits(s string, w float64) bool { return fitsAt(s, w, 6) }

// fitsAt is fits for a font whose characters are about cw px wide.
func fitsAt(s string, w, cw float64) bool { return float64(utf8.RuneCountInString(s))*cw+6 <= w }

func (tl *timeline) x(t int64) float64 {
	t = min(max(t, tl.t0), tl.t1)
	return tlLeft + float64(t-tl.t0)/float64(tl.t1-tl.t0)*float64(tlWidth-tlLeft-tlRight)
}

// rel shows an instant as the time since the run began.
func (tl *timeline) rel(t int64) string {
	return "+" + strconv.FormatFloat(float64(t-tl.t0)/1e9, 'f', 3, 64) + "s"
}

func dur(d int64) string { return time.Duration(d).Round(time.Millisecond).String() }

// writeSVG draws the timeline. It returns the first write error.
func (tl *timeline) writeSVG(w io.Writer) error {
	s := &svgw{w: w}
	head, notes := tl.header()
	lay := tl.layout(len(head), len(notes))
	legend := tl.legend()
	legendY := lay.bottom + 24
	height := legendY + 22*len(legend) + 6

	tl.drawHeader(s, height, head, notes)
	for i, l := range tl.lanes {
		fill := "#fff"
		if i%2 == 1 {
			fill = "#f4f4f4"
		}
		s.printf(`<rect x="0" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", lay.laneY[i], tlWidth, l.bands*tlBandH+tlStripH, fill)
	}
	tl.drawAxis(s, lay.axisY, lay.bottom)
	tl.drawSkipped(s, lay.axisY)
	for i, l := range tl.lanes {
		tl.drawLane(s, l, lay.laneY[i])
	}
	// Overlaps on top of everything: they are what a reader looks for.
	tl.drawOverlaps(s, lay.lanesY, lay.bottom)
	tl.drawLegend(s, legend, legendY)
	s.printf("</svg>\n")
	return s.err
}

// header is the drawing's header: the run and what the checker found, then
// notes of its violations (at most tlMaxNotes of them).
func (tl *timeline) header() (head, notes []string) {
	sp := tl.spec
	claim := "one claim"
	if sp.Slots > 0 {
		claim = fmt.Sprintf("a group of %d slots", sp.Slots)
	}
	head = []string{
		fmt.Sprintf("%s seed=%d: %v, TTL %v, %d workers on %s", sp.Backend, sp.Seed, sp.Duration, sp.TTL, sp.Workers, claim),
		tl.res.Line(),
	}
	if sp.Broken != "" {
		head[0] += ", workers broken on purpose: " + sp.Broken
	}
	for i, v := range tl.res.Violations {
		if i == tlMaxNotes {
			notes = append(notes, fmt.Sprintf("… and %d more violations (see the journal)", len(tl.res.Violations)-i))
			break
		}
		notes = append(notes, "VIOLATION "+v.Check+": "+v.Detail)
	}
	return head, notes
}

// tlLayout is where the drawing's parts go, from the top.
type tlLayout struct {
	axisY  int   // the time axis's labels
	lanesY int   // the first lane's top
	laneY  []int // each lane's top
	bottom int   // the last lane's bottom
}

// layout places the axis below a header of heads lines and notes notes,
// and the lanes below it.
func (tl *timeline) layout(heads, notes int) tlLayout {
	lay := tlLayout{axisY: 30 + 18*heads + 16*notes + 18}
	lay.lanesY = lay.axisY + 20
	if len(tl.skipped) > 0 {
		lay.lanesY += 14
	}
	y := lay.lanesY
	lay.laneY = make([]int, len(tl.lanes))
	for i, l := range tl.lanes {
		lay.laneY[i] = y
		y += l.bands*tlBandH + tlStripH
	}
	lay.bottom = y
	return lay
}

// drawHeader begins the drawing, height high: its element, title,
// description and style, its background, and the header's lines.
func (tl *timeline) drawHeader(s *svgw, height int, head, notes []string) {
	sp := tl.spec
	s.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="11">`+"\n",
		tlWidth, height, tlWidth, height)
	s.printf("<title>tenure fault campaign: %s seed %d</title>\n", esc(sp.Backend), sp.Seed)
	s.printf(`<desc>One lane per worker: terms as bars (token and slot), acts as ticks above them, the fenced resource's accepts below and its rejections as crosses; faults as shaded spans; servers' pauses and restarts on lanes of their own. Times are from the start of the run.</desc>` + "\n")
	s.printf(`<style>
text.h{font-size:14px;font-weight:bold}
text.m{font-family:"DejaVu Sans Mono",monospace;font-size:11px}
text.v{font-family:"DejaVu Sans Mono",monospace;font-size:11px;fill:#b00}
text.lane{font-size:12px;font-weight:bold}
text.sub{font-size:10px;fill:#666}
text.tick{font-size:10px;fill:#555}
text.bar{font-size:10px;fill:#111}
text.fl{font-size:9px;fill:#333}
line.grid{stroke:#e4e4e4;stroke-width:1}
line.proc{stroke:#999;stroke-width:2}
path.act{stroke:#222;stroke-width:1}
path.acc{stroke:#38761d;stroke-width:1.2}
path.rej{stroke:#c00;stroke-width:2;fill:none}
path.stale{stroke:#c00;stroke-width:1;stroke-dasharray:3 2;fill:none}
rect.fault{fill-opacity:.32}
rect.never{fill:#fcc;stroke:#c00;stroke-dasharray:4 2}
</style>
`)
	s.printf(`<rect width="%d" height="%d" fill="#fff"/>`+"\n", tlWidth, height)
	s.printf(`<text class="h" x="10" y="22">tenure fault campaign — run timeline</text>` + "\n")
	hy := 22
	for _, h := range head {
		hy += 18
		s.printf(`<text class="m" x="10" y="%d">%s</text>`+"\n", hy, esc(clip(h, 200)))
	}
	for _, n := range notes {
		hy += 16
		s.printf(`<text class="v" x="10" y="%d">%s<title>%s</title></text>`+"\n", hy, esc(clip(n, 200)), esc(n))
	}
}

// drawAxis draws the time axis, its labels at axisY, and its grid down to
// bottom, with a step that gives at most 25 lines.
func (tl *timeline) drawAxis(s *svgw, axisY, bottom int) {
	span := float64(tl.t1-tl.t0) / 1e9
	step := 0.5
	for _, st := range []float64{0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600} {
		step = st
		if span/st <= 25 {
			break
		}
	}
	s.printf(`<g class="axis">` + "\n")
	for k := 0; float64(k)*step <= span; k++ {
		t := tl.t0 + int64(float64(k)*step*1e9)
		x := tl.x(t)
		s.printf(`<line class="grid" x1="%s" y1="%d" x2="%s" y2="%d"/><text class="tick" x="%s" y="%d" text-anchor="middle">%ss</text>`+"\n",
			px(x), axisY+4, px(x), bottom, px(x), axisY, strconv.FormatFloat(float64(k)*step, 'f', -1, 64))
	}
	s.printf("</g>\n")
}

// drawSkipped marks under the axis the faults the driver found no target
// for.
func (tl *timeline) drawSkipped(s *svgw, axisY int) {
	for _, f := range tl.skipped {
		x := tl.x(f.from)
		s.printf(`<g class="fault skipped" data-fault="%d" data-kind="%s" data-target=""><title>fault %d: %s at %s, skipped: %s</title><path d="M%s %dl-4 8h8z" fill="none" stroke="#777"/></g>`+"\n",
			f.n, esc(f.kind), f.n, esc(f.kind), tl.rel(f.from), esc(f.skipped), px(x), axisY+8)
	}
}

// drawOverlaps shades, across every lane from top to bottom, where terms
// acted at once.
func (tl *timeline) drawOverlaps(s *svgw, top, bottom int) {
	for _, o := range tl.overlaps {
		x1, x2 := tl.x(o.from), tl.x(o.to)
		s.printf(`<g class="overlap"><title>%s from %s to %s</title><rect x="%s" y="%d" width="%s" height="%d" fill="#f00" fill-opacity=".12" stroke="#c00" stroke-opacity=".5"/><rect x="%s" y="%d" width="%s" height="5" fill="#c00"/></g>`+"\n",
			esc(o.what), tl.rel(o.from), tl.rel(o.to), px(x1), top, px(max(x2-x1, 3)), bottom-top, px(x1), top-6, px(max(x2-x1, 3)))
	}
}

func (tl *timeline) drawLane(s *svgw, l *tlLane, top int) {
	h := l.bands*tlBandH + tlStripH
	bottom := top + h
	s.printf(`<g class="lane" data-lane="%s">`+"\n", esc(l.name))
	kind := "worker"
	if l.server {
		kind = "server"
	}
	s.printf(`<text class="lane" x="10" y="%d">%s<title>%s %s</title></text><text class="sub" x="10" y="%d">%s</text>`+"\n",
		top+17, esc(clip(l.name, 16)), kind, esc(l.name), top+30, kind)

	// Faults, under everything else.
	for _, f := range l.faults {
		x1, x2 := tl.x(f.from), tl.x(f.to)
		color, ok := faultStyle[f.kind]
		if !ok {
			color = "#999"
		}
		end := "healed at " + tl.rel(f.to)
		switch f.kind {
		case schedule.FKill, schedule.FTerm:
			end = "restarted at " + tl.rel(f.to)
		case schedule.FServerKill:
			end = "restarted, and ready, at " + tl.rel(f.to)
		case schedule.FStopShort, schedule.FStopLong, schedule.FStopFollower, schedule.FServerPause:
			end = "continued at " + tl.rel(f.to)
		}
		if !f.healed {
			end = "not healed before the run ended"
		}
		s.printf(`<g class="fault" data-fault="%d" data-kind="%s" data-target="%s"><title>fault %d: %s on %s at %s, %s (%s)</title>`,
			f.n, esc(f.kind), esc(f.target), f.n, esc(f.kind), esc(f.target), tl.rel(f.from), end, dur(f.to-f.from))
		s.printf(`<rect class="fault" x="%s" y="%d" width="%s" height="%d" fill="%s"/>`, px(x1), top, px(max(x2-x1, 2)), h, color)
		if fitsAt(f.kind, x2-x1, 5.2) {
			s.printf(`<text class="fl" x="%s" y="%d">%s</text>`, px(x1+3), bottom-4, esc(f.kind))
		}
		s.printf("</g>\n")
	}

	// Processes: a line from start to end, a cross where a kill ended one.
	for _, p := range l.procs {
		x1, x2 := tl.x(p.from), tl.x(p.to)
		y := bottom - 13
		how := "until the end of the run"
		switch {
		case p.killed:
			how = "until killed at " + tl.rel(p.to)
		case p.termed:
			how = "until told to stop (SIGTERM) at " + tl.rel(p.to)
		case p.to < tl.t1:
			how = "until " + tl.rel(p.to)
		}
		s.printf(`<g class="proc" data-pid="%d"><title>%s pid %d: from %s %s</title><line class="proc" x1="%s" y1="%d" x2="%s" y2="%d"/><circle cx="%s" cy="%d" r="2.5" fill="#999"/>`,
			p.pid, esc(l.name), p.pid, tl.rel(p.from), how, px(x1), y, px(x2), y, px(x1), y)
		if p.killed {
			s.printf(`<path d="M%s %dl6 6m0 -6l-6 6" stroke="#555" stroke-width="1.5"/>`, px(x2-3), y-3)
		}
		s.printf("</g>\n")
	}

	for _, t := range l.terms {
		tl.drawTerm(s, l, t, top+t.band*tlBandH)
	}
	for _, r := range l.orphans {
		x := tl.x(r.T)
		s.printf(`<g class="%s"><title>%s of token %d slot %d from %s pid %d at %s, of no term in the journal</title><circle cx="%s" cy="%d" r="3" fill="#c00"/></g>`+"\n",
			r.Ev, r.Ev, r.Tok, r.Slot, esc(r.Worker), r.PID, tl.rel(r.T), px(x), top+8)
	}
	s.printf("</g>\n")
}

func (tl *timeline) drawTerm(s *svgw, l *tlLane, t *tlTerm, top int) {
	barY, barH := top+10, 18
	x1, x2 := tl.x(t.from), tl.x(t.to)
	color := slotColor(t.Slot)
	acted := "never acted"
	if len(t.acts) > 0 {
		acted = fmt.Sprintf("acted %d times from %s to %s", len(t.acts), tl.rel(t.firstAct), tl.rel(t.lastAct))
	}
	how := "elected at " + tl.rel(t.from)
	switch {
	case !t.granted:
		how = "acted with a token it was never granted"
	case t.end == "killed", strings.HasPrefix(t.end, "no OnDemoted"), strings.HasPrefix(t.end, "process ended"):
		how += ", " + t.end + " at " + tl.rel(t.to)
	default:
		how += ", demoted at " + tl.rel(t.to) + " (" + t.end + ")"
	}
	s.printf(`<g class="term" data-worker="%s" data-pid="%d" data-token="%d" data-slot="%d" data-granted="%t"><title>%s pid %d, token %d, slot %d: %s; %s; %d writes accepted, %d rejected</title>`+"\n",
		esc(t.Worker), t.PID, t.Tok, t.Slot, t.granted,
		esc(t.Worker), t.PID, t.Tok, t.Slot, esc(how), acted, len(t.accepts), len(t.rejects))
	if t.granted {
		s.printf(`<rect x="%s" y="%d" width="%s" height="%d" rx="2" fill="%s" fill-opacity=".15" stroke="%s" stroke-opacity=".7"/>`+"\n",
			px(x1), barY, px(max(x2-x1, 2)), barH, color, color)
	} else {
		s.printf(`<rect class="never" x="%s" y="%d" width="%s" height="%d"/>`+"\n", px(x1), barY, px(max(x2-x1, 6)), barH)
		s.printf(`<text class="v" x="%s" y="%d">token %d never granted</text>`+"\n", px(max(x1, x2)+10), barY+13, t.Tok)
	}
	if len(t.acts) > 0 {
		a1, a2 := tl.x(t.firstAct), tl.x(t.lastAct)
		s.printf(`<rect x="%s" y="%d" width="%s" height="6" fill="%s"/>`+"\n", px(a1), barY+barH-6, px(max(a2-a1, 1.5)), color)
	}
	label := fmt.Sprintf("token %d · slot %d", t.Tok, t.Slot)
	if !fits(label, x2-x1) {
		label = fmt.Sprintf("t%d s%d", t.Tok, t.Slot)
	}
	if !fits(label, x2-x1) {
		label = strconv.FormatInt(t.Tok, 10)
	}
	if t.granted && fits(label, x2-x1) {
		s.printf(`<text class="bar" x="%s" y="%d">%s</text>`+"\n", px(x1+4), barY+10, label)
	}
	// Acts above the bar, accepts below it.
	ticks := func(class string, ts []int64, y1, y2 int) {
		if len(ts) == 0 {
			return
		}
		var d strings.Builder
		for _, at := range ts {
			fmt.Fprintf(&d, "M%s %dV%d", px(tl.x(at)), y1, y2)
		}
		s.printf(`<path class="%s" data-count="%d" d="%s"/>`+"\n", class, len(ts), d.String())
	}
	ticks("act", t.acts, barY-7, barY-1)
	ticks("acc", t.accepts, barY+barH+1, barY+barH+7)
	for _, r := range t.rejects {
		xa, xr := tl.x(r.Act), tl.x(r.T)
		cy := barY + barH/2
		s.printf(`<g class="reject"><title>%s pid %d, token %d, slot %d: the write of the act at %s arrived at %s and was rejected (%s)</title>`,
			esc(r.Worker), r.PID, r.Tok, r.Slot, tl.rel(r.Act), tl.rel(r.T), esc(r.Reason))
		if r.Act > 0 && xr-xa > 2 {
			s.printf(`<path class="stale" d="M%s %dH%s"/>`, px(xa), cy, px(xr))
		}
		s.printf(`<path class="rej" d="M%s %dl8 8m0 -8l-8 8"/></g>`+"\n", px(xr-4), cy-4)
	}
	s.printf("</g>\n")
}

// legendItem is one entry of the legend: a sample 30 px wide drawn at
// (x, y), and its label.
type legendItem struct {
	draw  func(x, y float64) string
	label string
}

func (li legendItem) width() float64 { return 36 + float64(utf8.RuneCountInString(li.label))*6.2 + 18 }

// legend is the legend's items in rows that fit the width.
func (tl *timeline) legend() [][]legendItem {
	c := slotColor(0)
	items := []legendItem{
		{func(x, y float64) string {
			return fmt.Sprintf(`<rect x="%s" y="%s" width="30" height="14" rx="2" fill="%s" fill-opacity=".15" stroke="%s" stroke-opacity=".7"/><rect x="%s" y="%s" width="20" height="5" fill="%s"/>`,
				px(x), px(y-7), c, c, px(x), px(y+2), c)
		}, "term, OnElected to OnDemoted (dark: while it acted)"},
		{func(x, y float64) string {
			return fmt.Sprintf(`<path class="act" d="M%s %sv6m6 -6v6m6 -6v6m6 -6v6m6 -6v6"/><path class="acc" d="M%s %sv6m6 -6v6m6 -6v6m6 -6v6m6 -6v6"/>`,
				px(x+3), px(y-7), px(x+3), px(y+1))
		}, "acts (above the bar), writes the fence accepted (below)"},
		{func(x, y float64) string {
			return fmt.Sprintf(`<path class="stale" d="M%s %sH%s"/><path class="rej" d="M%s %sl8 8m0 -8l-8 8"/>`,
				px(x), px(y), px(x+26), px(x+22), px(y-4))
		}, "write rejected by the fence, dashed from its act"},
		{func(x, y float64) string {
			return fmt.Sprintf(`<line class="proc" x1="%s" y1="%s" x2="%s" y2="%s"/><path d="M%s %sl6 6m0 -6l-6 6" stroke="#555" stroke-width="1.5"/>`,
				px(x), px(y), px(x+27), px(y), px(x+24), px(y-3))
		}, "worker process (× killed)"},
	}
	kinds := map[string]bool{}
	for _, l := range tl.lanes {
		for _, f := range l.faults {
			kinds[f.kind] = true
		}
	}
	ks := make([]string, 0, len(kinds))
	for k := range kinds {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	for _, k := range ks {
		color, ok := faultStyle[k]
		if !ok {
			color = "#999"
		}
		items = append(items, legendItem{func(x, y float64) string {
			return fmt.Sprintf(`<rect class="fault" x="%s" y="%s" width="30" height="12" fill="%s"/>`, px(x), px(y-6), color)
		}, "fault: " + k})
	}
	if len(tl.overlaps) > 0 {
		items = append(items, legendItem{func(x, y float64) string {
			return fmt.Sprintf(`<rect x="%s" y="%s" width="30" height="12" fill="#f00" fill-opacity=".12" stroke="#c00"/>`, px(x), px(y-6))
		}, "terms acting at once: a violation"})
	}
	if len(tl.skipped) > 0 {
		items = append(items, legendItem{func(x, y float64) string {
			return fmt.Sprintf(`<path d="M%s %sl-4 8h8z" fill="none" stroke="#777"/>`, px(x+15), px(y-4))
		}, "fault skipped: no target"})
	}
	var rows [][]legendItem
	var row []legendItem
	w := 10.0
	for _, it := range items {
		if len(row) > 0 && w+it.width() > tlWidth-10 {
			rows, row, w = append(rows, row), nil, 10
		}
		row = append(row, it)
		w += it.width()
	}
	return append(rows, row)
}

func (tl *timeline) drawLegend(s *svgw, rows [][]legendItem, y int) {
	s.printf(`<g class="legend">` + "\n")
	for r, row := range rows {
		x, yy := 10.0, float64(y+22*r)
		for _, it := range row {
			s.printf("%s", it.draw(x, yy))
			s.printf(`<text x="%s" y="%s">%s</text>`+"\n", px(x+36), px(yy+4), esc(it.label))
			x += it.width()
		}
	}
	s.printf("</g>\n")
}
