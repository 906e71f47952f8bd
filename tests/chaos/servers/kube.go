package servers

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/tenure-go/tenure/internal/testrig/toxiproc"
	"github.com/tenure-go/tenure/internal/tools/toolbuild"
	"github.com/tenure-go/tenure/tests/chaos/schedule"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeNamespace is where the workers' Lease objects live.
const kubeNamespace = "chaos"

// kubeBackend is a real kube-apiserver process over an etcd server process
// of its own. Each worker reaches the API server through a proxy of its
// own; the faults that concern the backend pause or kill the API server.
type kubeBackend struct {
	etcd    *etcdBackend
	bin     string
	dir     string
	addr    string // the API server's host:port
	token   string
	clients *proxies
	query   string // appended to the workers' store URLs: "" or kubeSession
	api     server // the API server process
}

// KubeSession is the store URL parameter that makes a worker's store keep
// one session Lease for its claims (kube.WithSession at the default
// interval, which the store shortens for TTLs under four intervals).
const KubeSession = "&session=1s"

func StartKube(api *toxiproc.Server, dir, name string, workers int, query string) (Backend, error) {
	bin, err := toolbuild.KubeAPIServer.Path()
	if err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	e, err := StartEtcd(api, dir, name+"-etcd", 1, 0, "")
	if err != nil {
		return nil, err
	}
	b := &kubeBackend{etcd: e, query: query, bin: bin, dir: filepath.Join(dir, "kube"),
		api: server{name: "kube-apiserver", logPath: filepath.Join(dir, "kube-apiserver.log")}}
	if err := b.credentials(); err != nil {
		b.Close()
		return nil, err
	}
	if b.addr, err = freeAddr(); err != nil {
		b.Close()
		return nil, err
	}
	if err := b.start(); err != nil {
		b.Close()
		return nil, err
	}
	if b.clients, err = newProxies(api, name, workers, []string{b.addr}); err != nil {
		b.Close()
		return nil, err
	}
	for w := range workers {
		if err := b.kubeconfig(w); err != nil {
			b.Close()
			return nil, err
		}
	}
	if err := b.namespace(); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func (b *kubeBackend) credentials() error {
	if err := os.MkdirAll(filepath.Join(b.dir, "certs"), 0o755); err != nil {
		return err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return err
	}
	b.token = hex.EncodeToString(tok)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(filepath.Join(b.dir, "sa.key"), keyPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.dir, "tokens.csv"), []byte(b.token+",chaos-admin,uid-admin,system:masters\n"), 0o600)
}

// start starts the API server and waits until /readyz answers.
func (b *kubeBackend) start() error {
	_, port, _ := net.SplitHostPort(b.addr)
	args := []string{b.bin,
		"--etcd-servers=http://" + b.etcd.members[0].client,
		"--etcd-prefix=/chaos",
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + port,
		"--cert-dir=" + filepath.Join(b.dir, "certs"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(b.dir, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(b.dir, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--token-auth-file=" + filepath.Join(b.dir, "tokens.csv"),
		"--authorization-mode=AlwaysAllow",
		"--endpoint-reconciler-type=none",
		"--shutdown-watch-termination-grace-period=1s",
	}
	if err := b.api.start(args); err != nil {
		return err
	}
	p := b.api.proc()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		// Only to ask /readyz before the workers, which check the
		// server's certificate, connect.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.Done():
			return errors.New("kube: kube-apiserver exited before it was ready (see kube-apiserver.log)")
		case <-time.After(100 * time.Millisecond):
		}
		req, _ := http.NewRequest(http.MethodGet, "https://"+b.addr+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+b.token)
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
	}
	return errors.New("kube: kube-apiserver not ready after 90s")
}

func (b *kubeBackend) kubeconfigPath(w int) string {
	return filepath.Join(b.dir, fmt.Sprintf("kubeconfig-w%d", w))
}

// kubeconfig writes worker w's kubeconfig, pointing at its proxy.
func (b *kubeBackend) kubeconfig(w int) error {
	ca, err := os.ReadFile(filepath.Join(b.dir, "certs", "apiserver.crt"))
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: chaos
  cluster:
    server: https://%s
    certificate-authority-data: %s
users:
- name: chaos-admin
  user:
    token: %s
contexts:
- name: chaos
  context:
    cluster: chaos
    user: chaos-admin
current-context: chaos
`, b.clients.addrs(w)[0], base64.StdEncoding.EncodeToString(ca), b.token)
	return os.WriteFile(b.kubeconfigPath(w), []byte(cfg), 0o600)
}

func (b *kubeBackend) namespace() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", b.kubeconfigPath(0))
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kubeNamespace}}, metav1.CreateOptions{})
	return err
}

func (b *kubeBackend) Kinds() []string {
	return append(append([]string(nil), schedule.WorkerKinds...), schedule.FLatency, schedule.FPartition, schedule.FServerPause, schedule.FServerKill)
}

func (b *kubeBackend) URL(w int) string {
	return "kube://" + kubeNamespace + "?kubeconfig=" + b.kubeconfigPath(w) + b.query
}

func (b *kubeBackend) Apply(f schedule.Fault, holder int) (func(), string, bool) {
	switch f.Kind {
	case schedule.FLatency, schedule.FPartition:
		return b.clients.fault(f, holder)
	case schedule.FServerPause:
		return b.api.pause()
	case schedule.FServerKill:
		return b.api.kill(func() {
			if err := b.start(); err != nil {
				fmt.Fprintf(os.Stderr, "chaos: restart kube-apiserver: %v\n", err)
			}
		})
	}
	return nil, "", false
}

func (b *kubeBackend) Close() {
	if b.clients != nil {
		b.clients.close()
	}
	b.api.stop(15 * time.Second)
	b.etcd.Close()
}
