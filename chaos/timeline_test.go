package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// svgDoc is what a test reads back from a timeline: the terms and faults
// it names by their data- attributes, and the text of every <title>.
type svgDoc struct {
	terms  map[termKey]int // how many <g class="term"> name each
	faults map[int]string  // fault number -> "kind target"
	titles []string
	marks  map[string]int // data-count summed by class (act, acc), and rejects
}

// parseTimeline parses an SVG timeline with encoding/xml, failing the test
// if it is not well-formed or its root is not an SVG element.
func parseTimeline(t *testing.T, b []byte) svgDoc {
	t.Helper()
	doc := svgDoc{terms: map[termKey]int{}, faults: map[int]string{}, marks: map[string]int{}}
	d := xml.NewDecoder(bytes.NewReader(b))
	var (
		root    bool
		inTitle int
		title   strings.Builder
	)
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("timeline is not well-formed XML: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if !root {
				if e.Name.Local != "svg" || e.Name.Space != "http://www.w3.org/2000/svg" {
					t.Fatalf("root element is %v, want svg in the SVG namespace", e.Name)
				}
				root = true
			}
			a := map[string]string{}
			for _, at := range e.Attr {
				a[at.Name.Local] = at.Value
			}
			switch {
			case e.Name.Local == "title":
				inTitle++
				title.Reset()
			case e.Name.Local == "g" && a["class"] == "term":
				pid, err1 := strconv.Atoi(a["data-pid"])
				tok, err2 := strconv.ParseInt(a["data-token"], 10, 64)
				slot, err3 := strconv.Atoi(a["data-slot"])
				if err1 != nil || err2 != nil || err3 != nil {
					t.Fatalf("term element with bad data- attributes: %v", e.Attr)
				}
				doc.terms[termKey{a["data-worker"], pid, tok, slot}]++
			case e.Name.Local == "g" && strings.HasPrefix(a["class"], "fault"):
				n, err := strconv.Atoi(a["data-fault"])
				if err != nil {
					t.Fatalf("fault element with bad data-fault: %v", e.Attr)
				}
				if _, dup := doc.faults[n]; dup {
					t.Errorf("fault %d drawn twice", n)
				}
				doc.faults[n] = a["data-kind"] + " " + a["data-target"]
			case e.Name.Local == "g" && a["class"] == "reject":
				doc.marks["reject"]++
			case e.Name.Local == "path" && a["data-count"] != "":
				n, _ := strconv.Atoi(a["data-count"])
				doc.marks[a["class"]] += n
			}
		case xml.CharData:
			if inTitle > 0 {
				title.Write(e)
			}
		case xml.EndElement:
			if e.Name.Local == "title" {
				inTitle--
				doc.titles = append(doc.titles, title.String())
			}
		}
	}
	if !root {
		t.Fatal("timeline has no root element")
	}
	return doc
}

// journalTerms are the terms a journal shows: every OnElected, and every
// token acted on.
func journalTerms(recs []record) map[termKey]bool {
	out := map[termKey]bool{}
	for _, r := range recs {
		if r.Ev == evElected || r.Ev == evAct {
			out[termKey{xmlChars(r.Worker), r.PID, r.Tok, r.Slot}] = true
		}
	}
	return out
}

// xmlChars is s as XML can carry it: a byte that is not UTF-8 or a rune
// that is not an XML character reads back as U+FFFD.
func xmlChars(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0xFFFE || r == 0xFFFF {
			r = utf8.RuneError
		}
		b.WriteRune(r)
	}
	return b.String()
}

// checkTimeline checks that the parsed timeline draws every term and every
// fault of recs, and nothing the journal does not have.
func checkTimeline(t *testing.T, doc svgDoc, recs []record) {
	t.Helper()
	want := journalTerms(recs)
	for k := range want {
		if doc.terms[k] == 0 {
			t.Errorf("term %+v of the journal is not in the timeline", k)
		}
	}
	for k := range doc.terms {
		if !want[k] {
			t.Errorf("timeline draws term %+v, which the journal does not have", k)
		}
	}
	faults := map[int]string{}
	for _, r := range recs {
		if r.Ev == evFault {
			faults[r.Fault] = xmlChars(r.Kind + " " + r.Target)
		}
	}
	for n, f := range faults {
		got, ok := doc.faults[n]
		if !ok {
			t.Errorf("fault %d (%s) of the journal is not in the timeline", n, f)
		} else if got != f {
			t.Errorf("fault %d is drawn as %q, want %q", n, got, f)
		}
	}
	for n := range doc.faults {
		if _, ok := faults[n]; !ok {
			t.Errorf("timeline draws fault %d, which the journal does not have", n)
		}
	}
}

// hostile is a worker name that breaks SVG written without escaping.
const hostile = `w"><script>alert(1)</script><g x='` + "&amp; \x00\xff ü"

// hostileText is what hostile reads as once escaped and parsed back: the
// NUL and the invalid byte are not XML characters and become U+FFFD.
var hostileText = strings.NewReplacer("\x00", "\uFFFD", "\xff", "\uFFFD").Replace(hostile)

// synthetic is a journal with every shape the timeline draws: a handover,
// a kill that ends a term with no OnDemoted, a long pause and its stale
// write rejected, a second slot, a token acted on that was never granted,
// a worker with a hostile name, server faults, a fault never healed and
// one skipped.
func synthetic() []record {
	h := &history{}
	s := int64(time.Second)
	h.add(record{Ev: evBegin, T: 100 * s})
	h.add(record{Ev: evStart, T: 100*s + 10*ms, Worker: "w0", PID: 10})
	h.add(record{Ev: evStart, T: 100*s + 20*ms, Worker: "w1", PID: 11})
	h.add(record{Ev: evStart, T: 100*s + 30*ms, Worker: hostile, PID: 12})
	h.elect(101*s, "w0", 10, 1)
	for t := 101 * s; t < 103*s; t += 100 * ms {
		h.act(t, t+50*ms, "w0", 10, 1)
	}
	h.add(record{Ev: evFault, T: 103 * s, Kind: fKill, Target: "w0", Fault: 1})
	h.add(record{Ev: evHeal, T: 103*s + 500*ms, Kind: fKill, Target: "w0", Fault: 1})
	h.add(record{Ev: evStart, T: 103*s + 510*ms, Worker: "w0", PID: 20})
	h.elect(105*s, "w1", 11, 2)
	h.act(105*s, 105*s+50*ms, "w1", 11, 2)
	h.add(record{Ev: evAct, T: 105*s + 200*ms, Worker: "w1", PID: 11, Tok: 2})
	h.add(record{Ev: evFault, T: 105*s + 250*ms, Kind: fStopLong, Target: "w1", Fault: 2})
	h.elect(108*s, hostile, 12, 3)
	h.act(108*s, 108*s+50*ms, hostile, 12, 3)
	h.add(record{Ev: evHeal, T: 109 * s, Kind: fStopLong, Target: "w1", Fault: 2})
	h.add(record{Ev: evReject, T: 109*s + 1*ms, Worker: "w1", PID: 11, Tok: 2, Act: 105*s + 200*ms, Reason: "token 2 below 3"})
	h.add(record{Ev: evDemoted, T: 109*s + 5*ms, Worker: "w1", PID: 11, Tok: 2, Reason: "expired"})
	h.add(record{Ev: evElected, T: 110 * s, Worker: "w0", PID: 20, Tok: 4, Slot: 1})
	h.add(record{Ev: evAct, T: 110 * s, Worker: "w0", PID: 20, Tok: 4, Slot: 1})
	h.add(record{Ev: evAct, T: 111 * s, Worker: "w1", PID: 11, Tok: 99})
	h.add(record{Ev: evFault, T: 111 * s, Kind: fServerPause, Target: "m0", Fault: 3})
	h.add(record{Ev: evHeal, T: 112 * s, Kind: fServerPause, Target: "m0", Fault: 3})
	h.add(record{Ev: evFault, T: 112 * s, Kind: fServerKill, Target: "m1", Fault: 4})
	h.add(record{Ev: evFault, T: 112 * s, Kind: fPartition, Target: hostile, Fault: 5})
	h.add(record{Ev: evHeal, T: 113 * s, Kind: fPartition, Target: hostile, Fault: 5})
	h.add(record{Ev: evFault, T: 113 * s, Kind: fStopFollower, Fault: 6, Reason: "skipped: no target"})
	h.add(record{Ev: evFault, T: 113 * s, Kind: `</title><x y="`, Target: "w1", Fault: 7})
	h.add(record{Ev: evDemoted, T: 114 * s, Worker: hostile, PID: 12, Tok: 3, Reason: "stopped <now> & \"then\""})
	h.add(record{Ev: evEnd, T: 115 * s})
	return h.recs
}

// TestTimelineDrawsEveryTermAndFault renders a journal written by hand and
// reads the SVG back with encoding/xml: every term and every fault of the
// journal is in it, names are escaped, and the marks add up.
func TestTimelineDrawsEveryTermAndFault(t *testing.T) {
	recs := synthetic()
	spec := runSpec{Backend: "etcd3", Seed: 42, Duration: 15 * time.Second, TTL: 2 * time.Second, Workers: 3, Slots: 2}
	res := check(recs, spec.TTL, spec.Slots, 0)
	if len(res.Violations) == 0 {
		t.Fatal("the synthetic journal broke no property; it is meant to show violations in the header")
	}
	var buf bytes.Buffer
	if err := buildTimeline(recs, spec, res).writeSVG(&buf); err != nil {
		t.Fatal(err)
	}
	doc := parseTimeline(t, buf.Bytes())
	checkTimeline(t, doc, recs)

	titles := strings.Join(doc.titles, "\n")
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
		case evAct:
			acts++
		case evAccept:
			accepts++
		case evReject:
			rejects++
		}
	}
	if got := doc.marks["act"]; got != acts {
		t.Errorf("timeline marks %d acts, journal has %d", got, acts)
	}
	if got := doc.marks["acc"]; got != accepts {
		t.Errorf("timeline marks %d accepts, journal has %d", got, accepts)
	}
	if got := doc.marks["reject"]; got != rejects {
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
	recs = append(recs, record{Ev: evElected, T: 111 * int64(time.Second), Worker: "w10", PID: 30, Tok: 5},
		record{Ev: evAct, T: 111 * int64(time.Second), Worker: "w10", PID: 30, Tok: 5},
		record{Ev: evElected, T: 111*int64(time.Second) + 1, Worker: "w10", PID: 30, Tok: 6, Slot: 1})
	tl := buildTimeline(recs, runSpec{}, result{})
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
	tl = buildTimeline([]record{
		{Ev: evBegin, T: 0},
		{Ev: evStart, T: 1 * sec, Worker: "w0", PID: 1},
		{Ev: evFault, T: 5 * sec, Kind: fTerm, Target: "w0", Fault: 1},
		{Ev: evHeal, T: 6 * sec, Kind: fTerm, Target: "w0", Fault: 1},
		{Ev: evStart, T: 6 * sec, Worker: "w0", PID: 2},
		{Ev: evEnd, T: 9 * sec},
	}, runSpec{}, result{})
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
	h := clean()
	// w0 acts inside w1's term; the fence rejects its write.
	h.add(record{Ev: evAct, T: 3200 * ms, Worker: "w0", PID: 10, Tok: 1})
	h.add(record{Ev: evReject, T: 3250 * ms, Worker: "w0", PID: 10, Tok: 1, Act: 3200 * ms})
	res := check(h.recs, time.Second, 0, 0)
	if checks(res) != "overlap" {
		t.Fatalf("checker found %q; want overlap", checks(res))
	}
	var buf bytes.Buffer
	if err := buildTimeline(h.recs, runSpec{}, res).writeSVG(&buf); err != nil {
		t.Fatal(err)
	}
	doc := parseTimeline(t, buf.Bytes())
	checkTimeline(t, doc, h.recs)
	var got []string
	for _, ti := range doc.titles {
		if strings.Contains(ti, "at once") {
			got = append(got, ti)
		}
	}
	want := []string{"slot 0: w0 (pid 10, token 1) and w1 (pid 11, token 5) acted at once from +3.000s to +3.200s"}
	if !slices.Equal(got, want) {
		t.Errorf("overlap titles = %q, want %q", got, want)
	}

	// Three terms on three slots of a group of two.
	g := &history{}
	for i := range 3 {
		w := "w" + strconv.Itoa(i)
		g.add(record{Ev: evElected, T: int64(i) * ms, Worker: w, PID: 10 + i, Tok: int64(1 + i), Slot: i})
		g.add(record{Ev: evAct, T: int64(i) * ms, Worker: w, PID: 10 + i, Tok: int64(1 + i), Slot: i})
		g.add(record{Ev: evAct, T: 100*ms - int64(i)*ms, Worker: w, PID: 10 + i, Tok: int64(1 + i), Slot: i})
	}
	tl := buildTimeline(g.recs, runSpec{Slots: 2}, result{})
	if want := []tlOverlap{{2 * ms, 98 * ms, "3 terms acted at once (at most 2)"}}; !slices.Equal(tl.overlaps, want) {
		t.Errorf("three terms on a group of two: overlaps %+v, want %+v", tl.overlaps, want)
	}

	// Without the late act, nothing overlaps.
	var clean2 bytes.Buffer
	if err := buildTimeline(clean().recs, runSpec{}, result{}).writeSVG(&clean2); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(clean2.String(), "at once") {
		t.Errorf("a clean handover is drawn with an overlap:\n%s", clean2.String())
	}
}
