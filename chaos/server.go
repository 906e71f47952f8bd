package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// readyFile is created in a server's data directory once it serves, so
// the driver can wait for a start or a restart without a client.
const readyFile = "chaos-ready"

// runServer is the server process: one etcd member, embedded, so that the
// campaign can pause, kill and restart the backend as a real process.
// Raft runs with 50 ms ticks and a 500 ms election timeout (the server's
// shortest lease is then 1 s), without fsync: the campaign kills the
// process, not the host, so the page cache survives a kill.
func runServer(args []string) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	name := fs.String("name", "m0", "member name")
	dir := fs.String("dir", "", "data directory")
	client := fs.String("client", "", "client host:port")
	peer := fs.String("peer", "", "peer host:port to listen on")
	advPeer := fs.String("advertise-peer", "", "peer host:port to advertise (default -peer)")
	cluster := fs.String("cluster", "", "initial cluster (name=http://host:port,...); default this member alone")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *client == "" || *peer == "" {
		return errors.New("chaos server: -dir, -client and -peer are required")
	}
	if *advPeer == "" {
		*advPeer = *peer
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = *name, *dir
	cfg.TickMs, cfg.ElectionMs, cfg.UnsafeNoFsync = 50, 500, true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cu := url.URL{Scheme: "http", Host: *client}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls = []url.URL{{Scheme: "http", Host: *peer}}
	cfg.AdvertisePeerUrls = []url.URL{{Scheme: "http", Host: *advPeer}}
	if *cluster == "" {
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	} else {
		cfg.InitialCluster = *cluster
	}
	ready := filepath.Join(*dir, readyFile)
	_ = os.Remove(ready)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("chaos server: %w", err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return fmt.Errorf("chaos server: %w", err)
	case <-time.After(60 * time.Second):
		return errors.New("chaos server: not ready after 60s")
	}
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	select {
	case <-ctx.Done():
		return nil
	case err := <-e.Err():
		return fmt.Errorf("chaos server: %w", err)
	}
}
