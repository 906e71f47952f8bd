package filestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const racers = 8

func startRacers(t *testing.T, dir string) []*child {
	t.Helper()
	cs := make([]*child, racers)
	for i := range cs {
		cs[i] = startChild(t, "racer", nil, envDir+"="+dir, envID+"="+strconv.Itoa(i))
	}
	return cs
}

// TestProcessesRaceForOneKey has 8 processes race to create one key, round
// after round: exactly one wins each round, and its token is above every
// earlier one.
func TestProcessesRaceForOneKey(t *testing.T) {
	dir := t.TempDir()
	cs := startRacers(t, dir)
	ctx := ctxT(t)
	const rounds = 100
	last := int64(0)
	wins := make([]int, racers)
	for round := range rounds {
		for _, c := range cs {
			c.send("create leader")
		}
		winner, token := -1, int64(0)
		for i, c := range cs {
			f := strings.Fields(c.recv(ctx))
			if len(f) != 2 {
				t.Fatalf("round %d: racer %d answered %q", round, i, f)
			}
			n, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "win":
				if winner >= 0 {
					t.Fatalf("round %d: racers %d and %d both won (tokens %d, %d)", round, winner, i, token, n)
				}
				winner, token = i, n
			case "lose":
			default:
				t.Fatalf("round %d: racer %d answered %q", round, i, f)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody won", round)
		}
		if token <= last {
			t.Fatalf("round %d: token %d not above the previous %d", round, token, last)
		}
		last = token
		wins[winner]++
		cs[winner].send(fmt.Sprintf("delete leader %d", token))
		if got := cs[winner].recv(ctx); got != "deleted" {
			t.Fatalf("round %d: delete answered %q", round, got)
		}
	}
	t.Logf("wins per racer over %d rounds: %v", rounds, wins)
}

// TestProcessesIncrementOneCounter has 8 processes increment one counter by
// compare-and-set at once: no increment is lost.
func TestProcessesIncrementOneCounter(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(context.Background(), dir, WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := ctxT(t)
	if _, err := s.CreateIfAbsent(ctx, "n", []byte("0"), 0); err != nil {
		t.Fatal(err)
	}
	cs := startRacers(t, dir)
	const each = 12
	for _, c := range cs {
		c.send(fmt.Sprintf("incr n %d", each))
	}
	for i, c := range cs {
		if got := c.recv(ctx); got != "incremented" {
			t.Fatalf("racer %d answered %q", i, got)
		}
	}
	got, err := s.Get(ctx, "n")
	if want := strconv.Itoa(racers * each); err != nil || string(got.Value) != want || got.Revision != racers*each+1 {
		t.Fatalf("counter = %q at rev %d, %v; want %s at rev %d", got.Value, got.Revision, err, want, racers*each+1)
	}
}

func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}
