package timelinetest

import (
	"bytes"
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tenure-go/tenure/tests/chaos/check"
	"github.com/tenure-go/tenure/tests/chaos/journal"
)

// SVG is what a test reads back from a timeline: the terms and faults
// it names by their data- attributes, and the text of every <title>.
type SVG struct {
	Terms  map[check.TermKey]int // how many <g class="term"> name each
	Faults map[int]string        // fault number -> "kind target"
	Titles []string
	Marks  map[string]int // data-count summed by class (act, acc), and rejects
}

// Parse parses an SVG timeline with encoding/xml, failing the test
// if it is not well-formed or its root is not an SVG element.
func Parse(t *testing.T, b []byte) SVG {
	t.Helper()
	doc := SVG{Terms: map[check.TermKey]int{}, Faults: map[int]string{}, Marks: map[string]int{}}
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
				doc.Terms[check.TermKey{Worker: a["data-worker"], PID: pid, Tok: tok, Slot: slot}]++
			case e.Name.Local == "g" && strings.HasPrefix(a["class"], "fault"):
				n, err := strconv.Atoi(a["data-fault"])
				if err != nil {
					t.Fatalf("fault element with bad data-fault: %v", e.Attr)
				}
				if _, dup := doc.Faults[n]; dup {
					t.Errorf("fault %d drawn twice", n)
				}
				doc.Faults[n] = a["data-kind"] + " " + a["data-target"]
			case e.Name.Local == "g" && a["class"] == "reject":
				doc.Marks["reject"]++
			case e.Name.Local == "path" && a["data-count"] != "":
				n, _ := strconv.Atoi(a["data-count"])
				doc.Marks[a["class"]] += n
			}
		case xml.CharData:
			if inTitle > 0 {
				title.Write(e)
			}
		case xml.EndElement:
			if e.Name.Local == "title" {
				inTitle--
				doc.Titles = append(doc.Titles, title.String())
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
func journalTerms(recs []journal.Record) map[check.TermKey]bool {
	out := map[check.TermKey]bool{}
	for _, r := range recs {
		if r.Ev == journal.EvElected || r.Ev == journal.EvAct {
			out[check.TermKey{Worker: xmlChars(r.Worker), PID: r.PID, Tok: r.Tok, Slot: r.Slot}] = true
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

// Check checks that the parsed timeline draws every term and every
// fault of recs, and nothing the journal does not have.
func Check(t *testing.T, doc SVG, recs []journal.Record) {
	t.Helper()
	want := journalTerms(recs)
	for k := range want {
		if doc.Terms[k] == 0 {
			t.Errorf("term %+v of the journal is not in the timeline", k)
		}
	}
	for k := range doc.Terms {
		if !want[k] {
			t.Errorf("timeline draws term %+v, which the journal does not have", k)
		}
	}
	faults := map[int]string{}
	for _, r := range recs {
		if r.Ev == journal.EvFault {
			faults[r.Fault] = xmlChars(r.Kind + " " + r.Target)
		}
	}
	for n, f := range faults {
		got, ok := doc.Faults[n]
		if !ok {
			t.Errorf("fault %d (%s) of the journal is not in the timeline", n, f)
		} else if got != f {
			t.Errorf("fault %d is drawn as %q, want %q", n, got, f)
		}
	}
	for n := range doc.Faults {
		if _, ok := faults[n]; !ok {
			t.Errorf("timeline draws fault %d, which the journal does not have", n)
		}
	}
}
