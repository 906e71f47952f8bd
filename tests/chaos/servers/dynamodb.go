package servers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/tenure-go/tenure/backends/dynamodb/dynamotest"
	"github.com/tenure-go/tenure/internal/testrig/toxiproc"
	"github.com/tenure-go/tenure/storeurl"
	"github.com/tenure-go/tenure/tests/chaos/schedule"
)

// dynamoTable is the table the workers' claims live in.
const dynamoTable = "chaos"

// dynamoRegion is the region the workers' URLs name; dynalite takes any.
const dynamoRegion = "us-east-1"

// dynamoBackend is one dynalite process (package dynamotest's command
// line: dynalite 4.0.0 under node, keeping its tables in a LevelDB
// directory), on a fixed port. Each worker reaches it through a proxy of
// its own. A pause is a SIGSTOP of the node process; a kill is a SIGKILL,
// and the restart reopens the same directory on the same port.
type dynamoBackend struct {
	srv     server
	argv    []string
	addr    string
	clients *proxies

	mu   sync.Mutex // held across a kill and across a restart
	down bool       // killed and not restarted
}

// StartDynamo starts dynalite and creates the table. The workers find
// their credentials in the environment (static ones: dynalite checks
// only that requests are signed), which StartDynamo sets unless it holds
// them already.
func StartDynamo(api *toxiproc.Server, dir, name string, workers int) (*dynamoBackend, error) {
	cli, err := dynamotest.CLI()
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("chaos: dynalite needs node: %w", err)
	}
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "chaos", "AWS_SECRET_ACCESS_KEY": "chaos-secret", "AWS_EC2_METADATA_DISABLED": "true"} {
		if os.Getenv(k) == "" {
			os.Setenv(k, v)
		}
	}
	addr, release, err := reserve()
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	data := filepath.Join(dir, name+"-dynalite")
	if err := os.MkdirAll(data, 0o755); err != nil {
		release()
		return nil, fmt.Errorf("chaos: %w", err)
	}
	b := &dynamoBackend{
		srv:  server{name: "dynalite", logPath: filepath.Join(dir, name+"-dynalite.log")},
		argv: dynamotest.Argv(node, cli, addr, data),
		addr: addr,
	}
	release()
	if err := b.start(); err != nil {
		b.Close()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := storeurl.Open(ctx, b.url(addr)+"&create=true")
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("chaos: create the DynamoDB table: %w", err)
	}
	if err := s.Close(); err != nil {
		b.Close()
		return nil, err
	}
	if b.clients, err = newProxies(api, name, workers, []string{addr}); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// start starts dynalite and waits until it answers.
func (b *dynamoBackend) start() error {
	if err := b.srv.start(b.argv); err != nil {
		return err
	}
	if err := dynamotest.WaitReady(b.addr, b.srv.proc(), 60*time.Second); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	return nil
}

func (b *dynamoBackend) url(addr string) string {
	return "dynamodb://" + dynamoTable + "?region=" + dynamoRegion + "&endpoint=http://" + addr
}

// settle: the store judges expiry by local observation, so a follower
// counts a claim's TTL from its own first read after the server answers
// again; while the server was away the follower's elector backed off
// between attempts, up to a TTL, and its first read after a restart may
// come that late. A claim whose last write had an unknown outcome (the
// server killed under it) is then taken up to two TTLs after the heal.
func (b *dynamoBackend) settle(ttl time.Duration) time.Duration { return ttl }

func (b *dynamoBackend) Kinds() []string {
	return append(append([]string(nil), schedule.WorkerKinds...), schedule.FLatency, schedule.FPartition, schedule.FServerPause, schedule.FServerKill)
}

func (b *dynamoBackend) URL(w int) string { return b.url(b.clients.addrs(w)[0]) }

func (b *dynamoBackend) Apply(f schedule.Fault, holder int) (func(), string, bool) {
	switch f.Kind {
	case schedule.FLatency, schedule.FPartition:
		return b.clients.fault(f, holder)
	case schedule.FServerPause:
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.down {
			return nil, "", false
		}
		return b.srv.pause()
	case schedule.FServerKill:
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.down {
			return nil, "", false
		}
		heal, target, ok := b.srv.kill(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if err := b.start(); err != nil {
				fmt.Fprintf(os.Stderr, "chaos: restart dynalite: %v\n", err)
				return
			}
			b.down = false
		})
		if ok {
			b.down = true
		}
		return heal, target, ok
	}
	return nil, "", false
}

func (b *dynamoBackend) Close() {
	if b.clients != nil {
		b.clients.close()
	}
	b.srv.stop(10 * time.Second)
}
