package etcd_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/internal/tools/toolbuild"
)

// etcdServer is the etcd v3.7 server the tests run as a process: the
// binary TENURE_ETCD_SERVER names, or the one its build script builds and
// caches on first use.
var etcdServer = toolbuild.Etcd37

// startServer starts a single-member etcd as a process of its own on
// free ports of 127.0.0.1, with the fast timings the tests use (etcdtest,
// which needs a testing.TB an Example does not have). It returns the
// client endpoint and a function that stops the server and removes its
// files.
func startServer() (endpoint string, stop func(), err error) {
	bin, err := etcdServer.Path()
	if err != nil {
		return "", nil, err
	}
	// A port picked free may be taken by another process before the
	// server binds it: try again on fresh ones.
	for range 3 {
		if endpoint, stop, err = launchServer(bin); err == nil {
			return endpoint, stop, nil
		}
	}
	return "", nil, err
}

func launchServer(bin string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "tenure-etcd-example-")
	if err != nil {
		return "", nil, err
	}
	client, cerr := freeAddr()
	peer, perr := freeAddr()
	if cerr != nil || perr != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("pick ports: %v, %v", cerr, perr)
	}
	client, peer = "http://"+client, "http://"+peer
	p, err := childproc.Start(childproc.Spec{Argv: []string{bin,
		"--name", "example", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "example=" + peer,
		"--heartbeat-interval", "10", "--election-timeout", "100", "--unsafe-no-fsync",
		"--log-level", "warn",
	}, Log: filepath.Join(dir, "etcd.log")})
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stop := func() {
		p.Signal(syscall.SIGKILL)
		<-p.Done()
		os.RemoveAll(dir)
	}
	if err := waitServing(client, p); err != nil {
		stop()
		return "", nil, err
	}
	return client, stop, nil
}

// waitServing waits until the server answers a read, for at most a
// minute (generous: the machine may be busy with other tests under
// -race), or until its process exits.
func waitServing(endpoint string, p *childproc.Process) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	for {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Get(rctx, "health")
		rcancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("etcd exited before serving: %v", p.Wait())
		case <-ctx.Done():
			return fmt.Errorf("etcd not serving: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
