package servers

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// etcdArgv is the command line of an etcd member of the campaign, run from
// the etcd v3.6 binary bin. Raft runs with 50 ms ticks and a 500 ms
// election timeout (the server's shortest lease is then 1 s), without
// fsync: the campaign kills the process, not the host, so the page cache
// survives a kill. cluster is the initial cluster (name=http://host:port,
// ...); empty for this member alone. On a restart the member's data
// directory holds its cluster, and etcd ignores the initial one.
func etcdArgv(bin, name, dir, client, peer, advPeer, cluster string) []string {
	if cluster == "" {
		cluster = name + "=http://" + advPeer
	}
	return []string{bin,
		"--name", name, "--data-dir", dir,
		"--listen-client-urls", "http://" + client, "--advertise-client-urls", "http://" + client,
		"--listen-peer-urls", "http://" + peer, "--initial-advertise-peer-urls", "http://" + advPeer,
		"--initial-cluster", cluster,
		"--heartbeat-interval", "50", "--election-timeout", "500",
		"--unsafe-no-fsync", "--log-level", "warn",
	}
}

// waitEtcd waits until the etcd member of s at client says it is healthy
// (it has a leader and serves a read), at most d; it fails at once if the
// process exits.
func waitEtcd(s *server, client string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	p := s.proc()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = etcdHealthy(ctx, client); last == nil {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("chaos: %s exited before serving: %v", s.name, p.Wait())
		case <-ctx.Done():
			return fmt.Errorf("chaos: %s not ready after %v: %w", s.name, d, last)
		case <-tick.C:
		}
	}
}

// healthClient keeps no connection open between checks.
var healthClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func etcdHealthy(ctx context.Context, client string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+client+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := healthClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"health":"true"`) {
		return fmt.Errorf("health: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}
