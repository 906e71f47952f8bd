// Package kubetest runs a real kube-apiserver, over an etcd v3.6 server
// process of its own, for tests of the kube backend. It is test support: import it
// only from _test.go files.
//
// The kube-apiserver binary is the one TENURE_KUBE_APISERVER names, or else
// the one apiserver/build.sh builds from the Go module proxy and caches
// outside the repository, on first use (a cold build takes several
// minutes; parallel test binaries wait for one build). `make test` starts
// that build beside the tests that do not need it.
//
// Each Server is private to the test that started it: its own etcd (in a
// temporary directory), its own etcd prefix, port, certificates, service
// account key and tokens. Everything is torn down by t.Cleanup: the process is
// killed and waited for, etcd is closed, and every connection handed out
// through RESTConfig is closed, so goleak finds nothing left behind.
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"

	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/internal/testrig/etcdproc"
	"github.com/tenure-go/tenure/internal/tools/toolbuild"
)

// wall is the real clock: the API server is a real process on real time.
var wall = clock.New()

// EnvBinary names the environment variable that holds the path of the
// kube-apiserver binary.
const EnvBinary = "TENURE_KUBE_APISERVER"

const (
	adminUser        = "tenure-admin"
	unprivilegedUser = "tenure-nobody"

	startTimeout = 90 * time.Second // a cold start under -race on 2 busy cores
	stopTimeout  = 15 * time.Second
	pollInterval = 50 * time.Millisecond
	startTries   = 3 // a port picked free may be taken before the server binds it
)

// Server is a running kube-apiserver over an etcd server process. Its methods are
// called from the test goroutine; they are not safe for concurrent use with
// each other (the REST configs they return are).
type Server struct {
	bin     string
	dir     string // private working directory
	certDir string
	logPath string
	prefix  string // etcd prefix, unique per Server
	port    int

	adminToken, userToken string

	etcd  *etcdproc.Process
	conns *connrotation.ConnectionTracker

	proc *childproc.Process // nil while stopped
}

// Start starts etcd and a kube-apiserver for the test and registers their
// teardown with t.Cleanup. The API server authorizes with RBAC: the admin
// user of RESTConfig is in system:masters and may do anything; the user of
// UnprivilegedRESTConfig is authenticated but has no rights at all.
//
// Start fails the test if the kube-apiserver binary cannot be had.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := toolbuild.KubeAPIServer.Path()
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("kubetest: %s=%q: %v", EnvBinary, bin, err)
	}

	s := &Server{
		bin:        bin,
		dir:        t.TempDir(),
		prefix:     "/tenure-" + randomHex(t, 8),
		adminToken: randomHex(t, 16),
		userToken:  randomHex(t, 16),
		conns:      connrotation.NewConnectionTracker(),
	}
	s.certDir = filepath.Join(s.dir, "certs")
	s.logPath = filepath.Join(s.dir, "kube-apiserver.log")
	t.Cleanup(s.conns.CloseAll)

	s.writeCredentials(t)
	etcdBin, err := etcdproc.Binary36()
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	if s.etcd, err = etcdproc.Start(etcdBin, filepath.Join(s.dir, "etcd"), false); err != nil {
		t.Fatalf("kubetest: etcd: %v", err)
	}
	t.Cleanup(s.etcd.Stop)
	t.Cleanup(func() { s.stop(t) })
	s.launch(t, true)
	t.Logf("kubetest: kube-apiserver ready at %s", s.Host())
	return s
}

// Host is the API server's URL.
func (s *Server) Host() string { return "https://127.0.0.1:" + strconv.Itoa(s.port) }

// RESTConfig returns a config for the admin user (system:masters). Each call
// returns a new config; connections made through it are closed at cleanup.
func (s *Server) RESTConfig() *rest.Config { return s.restConfig(s.adminToken) }

// UnprivilegedRESTConfig returns a config for a user that authenticates but
// is granted nothing: every request it makes is Forbidden.
func (s *Server) UnprivilegedRESTConfig() *rest.Config { return s.restConfig(s.userToken) }

func (s *Server) restConfig(token string) *rest.Config {
	dialer := connrotation.NewDialerWithTracker((&net.Dialer{Timeout: 5 * time.Second}).DialContext, s.conns)
	return &rest.Config{
		Host:            s.Host(),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(s.certDir, "apiserver.crt")},
		// Tests and benchmarks measure the server, not client-side throttling.
		QPS:   1000,
		Burst: 2000,
		Dial:  dialer.DialContext,
	}
}

// EtcdEndpoint is the etcd server's client URL.
func (s *Server) EtcdEndpoint() string { return s.etcd.Endpoints()[0] }

// Restart stops the API server and starts it again on the same port, etcd,
// certificates and credentials, and waits until it is ready. Stored objects
// survive; clients see connection errors while it is down. Restart also
// starts a server that Stop stopped.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.stop(t)
	s.launch(t, false)
}

// Stop stops the API server gracefully (SIGTERM; etcd keeps running) and
// waits for it to exit. Restart brings it back.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	s.stop(t)
}

// Kill kills the API server (SIGKILL), as a crash would, and waits for it.
// Restart brings it back.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	if s.proc == nil {
		return
	}
	s.proc.Signal(syscall.SIGKILL)
	s.stop(t)
}

// WriteKubeconfig writes a kubeconfig file for the admin user to path, for
// programs (an example, kubectl) that read one. The file holds the token.
func (s *Server) WriteKubeconfig(path string) error {
	ca, err := os.ReadFile(filepath.Join(s.certDir, "apiserver.crt"))
	if err != nil {
		return fmt.Errorf("kubetest: kubeconfig: %w", err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `apiVersion: v1
kind: Config
clusters:
- name: kubetest
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: kubetest
  context:
    cluster: kubetest
    user: %s
current-context: kubetest
`, s.Host(), base64.StdEncoding.EncodeToString(ca), adminUser, s.adminToken, adminUser)
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		return fmt.Errorf("kubetest: kubeconfig: %w", err)
	}
	return nil
}

func (s *Server) writeCredentials(t testing.TB) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("kubetest: service account key: %v", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	// token,user,uid[,"group,..."]
	tokens := fmt.Sprintf("%s,%s,uid-admin,system:masters\n%s,%s,uid-nobody\n",
		s.adminToken, adminUser, s.userToken, unprivilegedUser)
	for name, data := range map[string][]byte{"sa.key": keyPEM, "tokens.csv": []byte(tokens)} {
		if err := os.WriteFile(filepath.Join(s.dir, name), data, 0o600); err != nil {
			t.Fatalf("kubetest: %v", err)
		}
	}
}

// launch starts the kube-apiserver and waits for /readyz. On the first start
// it picks a free port, and picks again if the server could not bind it; a
// restart keeps the port, which clients hold in their configs.
func (s *Server) launch(t testing.TB, pickPort bool) {
	t.Helper()
	var lastErr error
	for try := 0; try < startTries; try++ {
		if pickPort {
			s.port = freePort(t)
		}
		if err := s.exec(); err != nil {
			t.Fatalf("kubetest: start kube-apiserver: %v", err)
		}
		err := s.waitReady()
		if err == nil {
			return
		}
		lastErr = err
		s.stop(t)
		if !pickPort && !s.logContains("address already in use") {
			break
		}
	}
	t.Fatalf("kubetest: kube-apiserver did not become ready: %v\n%s", lastErr, s.logTail(60))
}

func (s *Server) exec() error {
	argv := []string{
		s.bin,
		"--etcd-servers=" + s.EtcdEndpoint(),
		"--etcd-prefix=" + s.prefix,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(s.port),
		"--cert-dir=" + s.certDir,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(s.dir, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(s.dir, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--token-auth-file=" + filepath.Join(s.dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--endpoint-reconciler-type=none",
		// Without it a graceful stop waits for open watches to end on their own.
		"--shutdown-watch-termination-grace-period=1s",
		"-v=1",
	}
	// Killed with the test binary if that dies without running its
	// cleanups (a timeout, a ^C), whichever thread started it (package
	// childproc).
	p, err := childproc.Start(childproc.Spec{Argv: argv, Log: s.logPath})
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

// waitReady polls /readyz until it answers ok, the process exits or the
// start timeout passes.
func (s *Server) waitReady() error {
	ctx, cancel := wall.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	tick := wall.Ticker(pollInterval)
	defer tick.Stop()
	var (
		client *http.Client
		last   error
	)
	defer func() {
		if client != nil {
			utilnet.CloseIdleConnectionsFor(client.Transport)
		}
	}()
	for {
		select {
		case <-s.proc.Done():
			return fmt.Errorf("exited: %v", s.proc.Wait())
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-tick.C:
		}
		if client == nil {
			// The server writes its certificates only once it runs.
			rt, err := rest.TransportFor(s.RESTConfig())
			if err != nil {
				last = err
				continue
			}
			client = &http.Client{Transport: rt}
		}
		if last = s.probe(ctx, client); last == nil {
			return nil
		}
	}
}

func (s *Server) probe(ctx context.Context, client *http.Client) error {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, s.Host()+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// stop ends the API server: SIGTERM, then SIGKILL if it has not exited in
// time. It waits for the process either way.
func (s *Server) stop(t testing.TB) {
	t.Helper()
	if s.proc == nil {
		return
	}
	s.proc.Signal(syscall.SIGTERM)
	timer := wall.Timer(stopTimeout)
	defer timer.Stop()
	select {
	case <-s.proc.Done():
	case <-timer.C:
		t.Logf("kubetest: kube-apiserver still running %v after SIGTERM; killing it", stopTimeout)
		s.proc.Signal(syscall.SIGKILL)
		<-s.proc.Done()
	}
	s.proc = nil
	// Connections to the old process are dead; drop them so clients redial.
	s.conns.CloseAll()
}

func (s *Server) logContains(sub string) bool {
	b, _ := os.ReadFile(s.logPath)
	return bytes.Contains(b, []byte(sub))
}

func (s *Server) logTail(lines int) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

var portMu sync.Mutex // serializes port picking among parallel tests

func freePort(t testing.TB) int {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("kubetest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("kubetest: random: %v", err)
	}
	return hex.EncodeToString(b)
}
