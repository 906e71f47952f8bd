package timeline

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/tests/chaos/check"
	"github.com/tenure-go/tenure/tests/chaos/journal"
	"github.com/tenure-go/tenure/tests/chaos/journaltest"
	"github.com/tenure-go/tenure/tests/chaos/schedule"
	"github.com/tenure-go/tenure/tests/chaos/timelinetest"
)

// hostile is a worker name that breaks SVG written without escaping.
const ms = int64(time.Millisecond)

const hostile = `w"><script>alert(1)</script><g x='` + "&amp; \x00\xff ü"

// hostileText is what hostile reads as once escaped and parsed back: the
// NUL and the invalid byte are not XML characters and become U+FFFD.
var hostileText = strings.NewReplacer("\x00", "\uFFFD", "\xff", "\uFFFD").Replace(hostile)

// synthetic is a journal with every shape the timeline draws: a handover,
// a kill that ends a term with no OnDemoted, a long pause and its stale
// write rejected, a second slot, a token acted on that was never granted,
// a worker with a hostile name, server faults, a fault never healed and
// one skipped.
func synthetic() []journal.Record {
	h := &journaltest.History{}
	s := int64(time.Second)
	h.Add(journal.Record{Ev: journal.EvBegin, T: 100 * s})
	h.Add(journal.Record{Ev: journal.EvStart, T: 100*s + 10*ms, Worker: "w0", PID: 10})
	h.Add(journal.Record{Ev: journal.EvStart, T: 100*s + 20*ms, Worker: "w1", PID: 11})
	h.Add(journal.Record{Ev: journal.EvStart, T: 100*s + 30*ms, Worker: hostile, PID: 12})
	h.Elect(101*s, "w0", 10, 1)
	for t := 101 * s; t < 103*s; t += 100 * ms {
		h.Act(t, t+50*ms, "w0", 10, 1)
	}
	h.Add(journal.Record{Ev: journal.EvFault, T: 103 * s, Kind: schedule.FKill, Target: "w0", Fault: 1})
	h.Add(journal.Record{Ev: journal.EvHeal, T: 103*s + 500*ms, Kind: schedule.FKill, Target: "w0", Fault: 1})
	h.Add(journal.Record{Ev: journal.EvStart, T: 103*s + 510*ms, Worker: "w0", PID: 20})
	h.Elect(105*s, "w1", 11, 2)
	h.Act(105*s, 105*s+50*ms, "w1", 11, 2)
	h.Add(journal.Record{Ev: journal.EvAct, T: 105*s + 200*ms, Worker: "w1", PID: 11, Tok: 2})
	h.Add(journal.Record{Ev: journal.EvFault, T: 105*s + 250*ms, Kind: schedule.FStopLong, Target: "w1", Fault: 2})
	h.Elect(108*s, hostile, 12, 3)
	h.Act(108*s, 108*s+50*ms, hostile, 12, 3)
	h.Add(journal.Record{Ev: journal.EvHeal, T: 109 * s, Kind: schedule.FStopLong, Target: "w1", Fault: 2})
	h.Add(journal.Record{Ev: journal.EvReject, T: 109*s + 1*ms, Worker: "w1", PID: 11, Tok: 2, Act: 105*s + 200*ms, Reason: "token 2 below 3"})
	h.Add(journal.Record{Ev: journal.EvDemoted, T: 109*s + 5*ms, Worker: "w1", PID: 11, Tok: 2, Reason: "expired"})
	h.Add(journal.Record{Ev: journal.EvElected, T: 110 * s, Worker: "w0", PID: 20, Tok: 4, Slot: 1})
	h.Add(journal.Record{Ev: journal.EvAct, T: 110 * s, Worker: "w0", PID: 20, Tok: 4, Slot: 1})
	h.Add(journal.Record{Ev: journal.EvAct, T: 111 * s, Worker: "w1", PID: 11, Tok: 99})
	h.Add(journal.Record{Ev: journal.EvFault, T: 111 * s, Kind: schedule.FServerPause, Target: "m0", Fault: 3})
	h.Add(journal.Record{Ev: journal.EvHeal, T: 112 * s, Kind: schedule.FServerPause, Target: "m0", Fault: 3})
	h.Add(journal.Record{Ev: journal.EvFault, T: 112 * s, Kind: schedule.FServerKill, Target: "m1", Fault: 4})
	h.Add(journal.Record{Ev: journal.EvFault, T: 112 * s, Kind: schedule.FPartition, Target: hostile, Fault: 5})
	h.Add(journal.Record{Ev: journal.EvHeal, T: 113 * s, Kind: schedule.FPartition, Target: hostile, Fault: 5})
	h.Add(journal.Record{Ev: journal.EvFault, T: 113 * s, Kind: schedule.FStopFollower, Fault: 6, Reason: "skipped: no target"})
	h.Add(journal.Record{Ev: journal.EvFault, T: 113 * s, Kind: `</title><x y="`, Target: "w1", Fault: 7})
	h.Add(journal.Record{Ev: journal.EvDemoted, T: 114 * s, Worker: hostile, PID: 12, Tok: 3, Reason: "stopped <now> & \"then\""})
	h.Add(journal.Record{Ev: journal.EvEnd, T: 115 * s})
	return h.Recs
}

// TestTimelineDrawsEveryTermAndFault renders a journal written by hand and
// reads the SVG back with encoding/xml: every term and every fault of the
// journal is in it, names are escaped, and the marks add up.
func TestTimelineDrawsEveryTermAndFault(t *testing.T) {
	recs := synthetic()
	spec := journal.RunSpec{Backend: "etcd3", Seed: 42, Duration: 15 * time.Second, TTL: 2 * time.Second, Workers: 3, Slots: 2}
	res := check.Check(recs, spec.TTL, spec.Slots, 0)
	if len(res.Violations) == 0 {
		t.Fatal("the synthetic journal broke no property; it is meant to show violations in the header")
	}
	var buf bytes.Buffer
	if err := buildTimeline(recs, spec, res).writeSVG(&buf); err != nil {
		t.Fatal(err)
	}
	doc := timelinetest.Parse(t, buf.Bytes())
	timelinetest.Check(t, doc, recs)

	titles := strings.Join(doc.Titles, "\n")
	for _, want := range []string{
		hostileText + " pid 12, token 3",                 // the hostile name, read back intact
		"demoted at +14.000s (stopped <now> & \"then\")", // a cause, escaped and read back
		"killed at +3.000s",                              // a term ended by a kill, without OnDemoted
		"token 99, slot 0: acted with a token it was never granted",
		"rejected (token 2 below 3)",
		"fault 4: server-kill on m1 at +12.000s, not healed before the run ended",
		"fault 6: stop-follower at +13.000s, skipped: skipped: no target",
		"VIOLATION token: w1 (pid 11) acted with token 99",
	} {
		if !strings.Contains(titles, want) {
			t.Errorf("no <title> contains %q; titles:\n%s", want, titles)
		}
	}
	var acts, accepts, rejects int
	for _, r := range recs {
		switch r.Ev {
		case journal.EvAct:
			acts++
		case journal.EvAccept:
			accepts++
		case journal.EvReject:
			rejects++
		}
	}
	if got := doc.Marks["act"]; got != acts {
		t.Errorf("timeline marks %d acts, journal has %d", got, acts)
	}
	if got := doc.Marks["acc"]; got != accepts {
		t.Errorf("timeline marks %d accepts, journal has %d", got, accepts)
	}
	if got := doc.Marks["reject"]; got != rejects {
		t.Errorf("timeline marks %d rejects, journal has %d", got, rejects)
	}
	if t.Failed() {
		t.Logf("SVG:\n%s", buf.String())
	}
}

// TestTimelineLanes checks the arrangement behind the picture: lanes for
// workers first (in numeric order), then the servers the faults hit; a
// process ended by a kill; and overlapping terms of one worker on bands of
// their own.
func TestTimelineLanes(t *testing.T) {
	recs := synthetic()
	// w10 is given a second slot while it holds a first: its terms
	// overlap, and go on two bands.
	recs = append(recs, journal.Record{Ev: journal.EvElected, T: 111 * int64(time.Second), Worker: "w10", PID: 30, Tok: 5},
		journal.Record{Ev: journal.EvAct, T: 111 * int64(time.Second), Worker: "w10", PID: 30, Tok: 5},
		journal.Record{Ev: journal.EvElected, T: 111*int64(time.Second) + 1, Worker: "w10", PID: 30, Tok: 6, Slot: 1})
	tl := buildTimeline(recs, journal.RunSpec{}, check.Result{})
	var names []string
	for _, l := range tl.lanes {
		names = append(names, fmt.Sprintf("%s:%t:%d", l.name, l.server, l.bands))
	}
	want := []string{"w0:false:1", "w1:false:1", "w10:false:2", hostile + ":false:1", "m0:true:1", "m1:true:1"}
	if !slices.Equal(names, want) {
		t.Errorf("lanes (name:server:bands) = %q, want %q", names, want)
	}
	w0 := tl.lanes[0]
	if len(w0.procs) != 2 || !w0.procs[0].killed || w0.procs[1].killed || w0.procs[1].to != tl.t1 {
		t.Errorf("w0's processes: want the first killed and the second running to the end; got %s", procsOf(w0.procs))
	}
	if tl.t0 != 100*int64(time.Second) || tl.t1 != 115*int64(time.Second) {
		t.Errorf("run from %d to %d; want the begin and end records' instants", tl.t0, tl.t1)
	}

	// A follower journals nothing while it waits: its process lived until
	// the SIGTERM, not only until its last record.
	sec := int64(time.Second)
	tl = buildTimeline([]journal.Record{
		{Ev: journal.EvBegin, T: 0},
		{Ev: journal.EvStart, T: 1 * sec, Worker: "w0", PID: 1},
		{Ev: journal.EvFault, T: 5 * sec, Kind: schedule.FTerm, Target: "w0", Fault: 1},
		{Ev: journal.EvHeal, T: 6 * sec, Kind: schedule.FTerm, Target: "w0", Fault: 1},
		{Ev: journal.EvStart, T: 6 * sec, Worker: "w0", PID: 2},
		{Ev: journal.EvEnd, T: 9 * sec},
	}, journal.RunSpec{}, check.Result{})
	ps := tl.lanes[0].procs
	if len(ps) != 2 || ps[0].to != 5*sec || !ps[0].termed || ps[0].killed || ps[1].to != 9*sec {
		t.Errorf("w0's processes: want the first until the SIGTERM at 5s, the second until the end at 9s; got %s", procsOf(ps))
	}
}

func procsOf(ps []*tlProc) string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%+v", *p))
	}
	return strings.Join(out, " ")
}

// TestTimelineShowsOverlaps draws a journal in which a term acts on after
// the next one began, which the checker reports: the picture marks the
// span once, and nothing else; and more terms acting at once than there
// are slots, each on a slot of its own.
func TestTimelineShowsOverlaps(t *testing.T) {
	h := journaltest.Clean()
	// w0 acts inside w1's term; the fence rejects its write.
	h.Add(journal.Record{Ev: journal.EvAct, T: 3200 * ms, Worker: "w0", PID: 10, Tok: 1})
	h.Add(journal.Record{Ev: journal.EvReject, T: 3250 * ms, Worker: "w0", PID: 10, Tok: 1, Act: 3200 * ms})
	res := check.Check(h.Recs, time.Second, 0, 0)
	if len(res.Violations) != 1 || res.Violations[0].Check != "overlap" {
		t.Fatalf("checker found %+v; want overlap", res.Violations)
	}
	var buf bytes.Buffer
	if err := buildTimeline(h.Recs, journal.RunSpec{}, res).writeSVG(&buf); err != nil {
		t.Fatal(err)
	}
	doc := timelinetest.Parse(t, buf.Bytes())
	timelinetest.Check(t, doc, h.Recs)
	var got []string
	for _, ti := range doc.Titles {
		if strings.Contains(ti, "at once") {
			got = append(got, ti)
		}
	}
	want := []string{"slot 0: w0 (pid 10, token 1) and w1 (pid 11, token 5) acted at once from +3.000s to +3.200s"}
	if !slices.Equal(got, want) {
		t.Errorf("overlap titles = %q, want %q", got, want)
	}

	// Three terms on three slots of a group of two.
	g := &journaltest.History{}
	for i := range 3 {
		w := "w" + strconv.Itoa(i)
		g.Add(journal.Record{Ev: journal.EvElected, T: int64(i) * ms, Worker: w, PID: 10 + i, Tok: int64(1 + i), Slot: i})
		g.Add(journal.Record{Ev: journal.EvAct, T: int64(i) * ms, Worker: w, PID: 10 + i, Tok: int64(1 + i), Slot: i})
		g.Add(journal.Record{Ev: journal.EvAct, T: 100*ms - int64(i)*ms, Worker: w, PID: 10 + i, Tok: int64(1 + i), Slot: i})
	}
	tl := buildTimeline(g.Recs, journal.RunSpec{Slots: 2}, check.Result{})
	if want := []tlOverlap{{2 * ms, 98 * ms, "3 terms acted at once (at most 2)"}}; !slices.Equal(tl.overlaps, want) {
		t.Errorf("three terms on a group of two: overlaps %+v, want %+v", tl.overlaps, want)
	}

	// Without the late act, nothing overlaps.
	var clean2 bytes.Buffer
	if err := buildTimeline(journaltest.Clean().Recs, journal.RunSpec{}, check.Result{}).writeSVG(&clean2); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(clean2.String(), "at once") {
		t.Errorf("a clean handover is drawn with an overlap:\n%s", clean2.String())
	}
}
