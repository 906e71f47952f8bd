package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends/dynamodb/dynamotest"
)

// dynamoEnv gives tenure's processes static credentials for dynalite
// through the AWS SDK's default chain, and nothing else to look in.
func dynamoEnv(t *testing.T) []string {
	dir := t.TempDir()
	return []string{
		"AWS_ACCESS_KEY_ID=tenure", "AWS_SECRET_ACCESS_KEY=tenure-test-secret", "AWS_SESSION_TOKEN=",
		"AWS_PROFILE=", "AWS_REGION=", "AWS_DEFAULT_REGION=", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none"),
	}
}

// TestRunOnDynamoDB runs tenure over a DynamoDB table (on dynalite),
// with the URL's create=true making the table: two tenures whose children
// each run 150ms never run them at once and their tokens strictly
// increase; then the holder is killed with SIGKILL and the other's child
// starts once the claim has expired. The store has no watch, so it is
// not among the stores of the other run tests, whose graceful handover
// must come well within the TTL.
func TestRunOnDynamoDB(t *testing.T) {
	if testing.Short() {
		t.Skip("dynalite skipped in -short mode")
	}
	srv := dynamotest.Start(t)
	url := "dynamodb://tenuretest?region=us-east-1&endpoint=" + srv.Endpoint() + "&create=true"
	env := dynamoEnv(t)
	j := filepath.Join(t.TempDir(), "journal")
	jobEnv := append([]string{envHold + "=150ms"}, env...)
	a := startTenure(t, "a", j, jobEnv, runArgs(url, "job", "a")...)
	b := startTenure(t, "b", j, jobEnv, runArgs(url, "job", "b")...)
	waitUntil(t, 60*time.Second, "6 children ran", func() bool { return count(readJournal(t, j), "end") >= 6 })
	a.signal(syscall.SIGTERM)
	b.signal(syscall.SIGTERM)
	for _, p := range []*proc{a, b} {
		if code := p.wait(10 * time.Second); code != 0 && code != 128+int(syscall.SIGTERM) {
			b, _ := os.ReadFile(p.log)
			t.Errorf("%s exited %d, want 0 or 143:\n%s", p.name, code, b)
		}
	}
	checkJournal(t, readJournal(t, j))

	k := filepath.Join(t.TempDir(), "journal")
	holder := startTenure(t, "holder", k, env, runArgs(url, "kill", "holder")...)
	waitUntil(t, 20*time.Second, "the holder's child started", func() bool { return count(readJournal(t, k), "start") == 1 })
	other := startTenure(t, "other", k, env, runArgs(url, "kill", "other")...)
	waitUntil(t, 20*time.Second, "the other saw the holder lead", func() bool { return other.logged(`msg="elector: new leader"`) })
	first := starts(readJournal(t, k))[0]
	holder.signal(syscall.SIGKILL)
	waitUntil(t, 5*time.Second, "the holder's child died with it", func() bool { return !alive(first.pid) })
	waitUntil(t, 2*testTTL+10*time.Second, "the other's child started", func() bool { return count(readJournal(t, k), "start") == 2 })
	if second := starts(readJournal(t, k))[1]; second.token <= first.token {
		t.Errorf("token after the takeover %d, want above %d", second.token, first.token)
	}
	other.signal(syscall.SIGTERM)
	if code := other.wait(10 * time.Second); code != 0 {
		t.Errorf("other exited %d, want its child's 0", code)
	}
	checkJournal(t, readJournal(t, k))
}
