package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/shards"
)

// TestResizeShards changes the count of a running shard group of two
// members (this process, over a filestore directory) with tenure resize
// --group --shards: the command returns once the change is done, the
// members route by the new count and own every new shard between them;
// and it refuses a group no member started and a mix of the two forms.
func TestResizeShards(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ms []*shards.Member
	for _, id := range []string{"a", "b"} {
		s, err := filestore.Open(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		m, err := shards.New(s, shards.Config{Group: "kv", Identity: id, Count: 4,
			Elector: elector.Config{TTL: 2 * time.Second, RenewPeriod: 500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Stop(context.Background()) })
		ms = append(ms, m)
	}
	owned := func(count int) bool {
		n := 0
		for _, m := range ms {
			if m.Count() != count {
				return false
			}
			n += len(m.Owned())
		}
		return n == count
	}
	waitUntil(t, 20*time.Second, "the 4 shards owned", func() bool { return owned(4) })

	url := "file://" + dir
	out, code, stderr := tenure(t, "resize", "--store", url, "--group", "kv", "--shards", "8")
	if code != 0 || out != "shard group \"kv\": 8 shards, was 4\n" {
		t.Fatalf("tenure resize --shards 8: status %d, stdout %q, stderr %q", code, out, stderr)
	}
	waitUntil(t, 20*time.Second, "the 8 shards owned", func() bool { return owned(8) })
	if out, code, _ := tenure(t, "resize", "--store", url, "--group", "kv", "--shards", "8"); code != 0 || out != "shard group \"kv\": 8 shards\n" {
		t.Errorf("tenure resize to the count in force: status %d, stdout %q", code, out)
	}
	for _, args := range [][]string{
		{"--group", "nogroup", "--shards", "8"},
		{"--group", "kv", "--shards", "8", "--key", "workers"},
		{"--group", "kv", "--shards", "0"},
	} {
		out, code, stderr := tenure(t, append([]string{"resize", "--store", url}, args...)...)
		if code != exitUsage || out != "" || strings.Count(stderr, "\n") != 1 {
			t.Errorf("tenure resize %v: status %d, stdout %q, stderr %q; want %d and one line", args, code, out, stderr, exitUsage)
		}
	}
}
