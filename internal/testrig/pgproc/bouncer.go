package pgproc

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tenure-go/tenure/internal/childproc"
)

// InstallBouncer is what the error says to do when no pgbouncer binary is
// found.
const InstallBouncer = "install PgBouncer (Debian/Ubuntu: apt-get install pgbouncer; it lands in /usr/sbin/pgbouncer)"

// Bouncer is a PgBouncer in front of one Server, in transaction pooling
// mode: each transaction (or statement outside one) gets a server
// connection of the pool, and gives it back when it ends. Session state
// (LISTEN, SET, session advisory locks, named prepared statements) does
// not follow a client from one transaction to the next.
type Bouncer struct {
	root string
	port int
	p    *childproc.Process
}

// findBouncer finds pgbouncer: PATH first, then Debian's /usr/sbin, which
// is off the PATH of many users.
func findBouncer() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", fmt.Errorf("pgproc: no pgbouncer binary on PATH or in /usr/sbin: %s", InstallBouncer)
}

// StartBouncer starts a PgBouncer in transaction mode in front of srv, for
// every database of srv and the user postgres (trusted, as srv trusts
// it), on 127.0.0.1 at a free port, with no unix socket. poolSize is the
// number of server connections it opens per database (0: 20, PgBouncer's
// default). It accepts connections when StartBouncer returns; Stop ends
// it. As root, it runs as nobody: PgBouncer refuses to run as root.
func StartBouncer(srv *Server, poolSize int) (*Bouncer, error) {
	bin, err := findBouncer()
	if err != nil {
		return nil, err
	}
	if poolSize <= 0 {
		poolSize = 20
	}
	root, err := ownedDir("pgbouncer-")
	if err != nil {
		return nil, fmt.Errorf("pgproc: %w", err)
	}
	b := &Bouncer{root: root}
	var last error
	for range 3 { // a port picked free may be taken before pgbouncer binds it
		if b.port, err = freePort(); err != nil {
			last = fmt.Errorf("pgproc: %w", err)
			break
		}
		if last = b.run(bin, srv, poolSize); last == nil {
			return b, nil
		}
	}
	_ = os.RemoveAll(root)
	return nil, last
}

// run writes the configuration for b's port and starts pgbouncer on it.
func (b *Bouncer) run(bin string, srv *Server, poolSize int) error {
	users := filepath.Join(b.root, "users.txt")
	ini := filepath.Join(b.root, "pgbouncer.ini")
	conf := strings.Join([]string{
		"[databases]",
		fmt.Sprintf("* = host=127.0.0.1 port=%d", srv.Port()),
		"[pgbouncer]",
		"listen_addr = 127.0.0.1",
		fmt.Sprintf("listen_port = %d", b.port),
		"unix_socket_dir =",
		"auth_type = trust",
		"auth_file = " + users,
		"pool_mode = transaction",
		"max_client_conn = 1000",
		fmt.Sprintf("default_pool_size = %d", poolSize),
		"", // the file ends with a newline
	}, "\n")
	for name, body := range map[string]string{users: `"postgres" ""` + "\n", ini: conf} {
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			return fmt.Errorf("pgproc: %w", err)
		}
	}
	spec := childproc.Spec{Argv: []string{bin, ini}, Log: filepath.Join(b.root, "log")}
	if os.Geteuid() == 0 {
		spec.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	}
	p, err := childproc.Start(spec)
	if err != nil {
		return fmt.Errorf("pgproc: start pgbouncer: %w", err)
	}
	b.p = p
	ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
	defer cancel()
	for {
		// Ready once a query goes through it to the server.
		_, err := Query(ctx, b.DSN("postgres"), "SELECT 1")
		if err == nil {
			return nil
		}
		select {
		case <-p.Done():
			log, _ := os.ReadFile(filepath.Join(b.root, "log"))
			return fmt.Errorf("pgproc: pgbouncer exited at start: %v\n%s", p.Wait(), tail(log))
		case <-ctx.Done():
			p.Terminate(5 * time.Second)
			log, _ := os.ReadFile(filepath.Join(b.root, "log"))
			return fmt.Errorf("pgproc: pgbouncer not ready within %v: %v\n%s", readyWithin, err, tail(log))
		case <-time.After(20 * time.Millisecond): // polling a child process
		}
	}
}

// Port is the TCP port the bouncer listens on, on 127.0.0.1.
func (b *Bouncer) Port() int { return b.port }

// Addr is "127.0.0.1:PORT".
func (b *Bouncer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)) }

// DSN is the connection URL of database db through the bouncer, as the
// user postgres.
func (b *Bouncer) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", b.Addr(), db)
}

// Log is what the bouncer has logged so far.
func (b *Bouncer) Log() string {
	log, _ := os.ReadFile(filepath.Join(b.root, "log"))
	return string(log)
}

// Stop ends the bouncer (SIGTERM, then SIGKILL) and deletes its directory.
func (b *Bouncer) Stop() {
	if b.p != nil {
		b.p.Terminate(5 * time.Second)
	}
	_ = os.RemoveAll(b.root)
}
