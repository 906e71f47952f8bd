package etcd_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// heldStreams is a client whose lease keep-alive streams report each
// message they send (sent), and whose streams open at the time of hold
// deliver nothing they receive until release is closed.
type heldStreams struct {
	sent    chan int64 // the lease of each keep-alive message sent
	release chan struct{}
	onSend  func() // run before the next message is sent, once

	mu      sync.Mutex
	streams []*heldStream // guarded by mu
}

type heldStream struct {
	grpc.ClientStream
	hs   *heldStreams
	mu   sync.Mutex
	hold bool // guarded by mu
}

func newHeldStreams() *heldStreams {
	return &heldStreams{sent: make(chan int64, 16), release: make(chan struct{})}
}

// holdOpen makes every keep-alive stream open now hold what it receives.
func (hs *heldStreams) holdOpen() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for _, s := range hs.streams {
		s.mu.Lock()
		s.hold = true
		s.mu.Unlock()
	}
}

func (hs *heldStreams) opened() int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return len(hs.streams)
}

func (hs *heldStreams) client(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainStreamInterceptor(
			func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				cs, err := streamer(ctx, desc, cc, method, opts...)
				if err != nil || !strings.HasSuffix(method, "/LeaseKeepAlive") {
					return cs, err
				}
				s := &heldStream{ClientStream: cs, hs: hs}
				hs.mu.Lock()
				hs.streams = append(hs.streams, s)
				hs.mu.Unlock()
				return s, nil
			})},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func (s *heldStream) SendMsg(m any) error {
	s.hs.mu.Lock()
	fn := s.hs.onSend
	s.hs.onSend = nil
	s.hs.mu.Unlock()
	if fn != nil {
		fn()
	}
	err := s.ClientStream.SendMsg(m)
	if req, ok := m.(*pb.LeaseKeepAliveRequest); ok && err == nil {
		s.hs.sent <- req.ID
	}
	return err
}

func (s *heldStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	s.mu.Lock()
	hold := s.hold
	s.mu.Unlock()
	if hold {
		<-s.hs.release
	}
	return err
}

// TestKeepAliveCallerGivingUpCostsOthersNothing checks that one caller whose
// context ends while its keep-alive is being sent, or after it was sent and
// before any answer, must not cost another caller waiting on the same stream
// its renewal. The stream's answers are held back until both callers have
// sent, and the first caller is cancelled at that point. Before, the store
// ended the shared stream for every waiter (the other caller got "keep-alive
// stream ended", a transient error, instead of its renewal). A stream that
// may be stuck is still left behind for new keep-alives: a renewal made while
// the answers are held goes on a new stream and is answered.
func TestKeepAliveCallerGivingUpCostsOthersNothing(t *testing.T) {
	servers(t, func(t *testing.T, start func(testing.TB) server) {
		for _, when := range []string{"while sending", "before the first answer"} {
			t.Run(when, func(t *testing.T) {
				f := newFixtureOn(t, start(t))
				hs := newHeldStreams()
				s := openStore(t, hs.client(t, f.srv.Endpoints()), f.prefix)
				ctx := testContext(t)
				a := mustCreate(t, s, "a", "v", 2*time.Second)
				b := mustCreate(t, s, "b", "v", 2*time.Second)
				c := mustCreate(t, s, "c", "v", 2*time.Second)
				renewOnce(t, s, c) // opens the stream
				for len(hs.sent) > 0 {
					<-hs.sent
				}
				hs.holdOpen()

				other := make(chan error, 1)
				go func() {
					_, err := s.KeepAlive(ctx, "b", b.Revision, 2*time.Second)
					other <- err
				}()
				<-hs.sent // b's keep-alive is out; its answer is held

				actx, cancel := context.WithCancel(ctx)
				defer cancel()
				if when == "while sending" {
					hs.mu.Lock()
					hs.onSend = cancel
					hs.mu.Unlock()
				}
				gaveUp := make(chan error, 1)
				go func() {
					_, err := s.KeepAlive(actx, "a", a.Revision, 2*time.Second)
					gaveUp <- err
				}()
				if when == "before the first answer" {
					<-hs.sent // a's keep-alive is out too
					cancel()
				}
				if err := <-gaveUp; !errors.Is(err, context.Canceled) || backends.Classify(err) != backends.ClassTransient {
					t.Errorf("KeepAlive whose caller gave up = %v, want context.Canceled (transient)", err)
				}

				// The held stream may be stuck: a renewal now opens another.
				if _, err := s.KeepAlive(ctx, "c", c.Revision, 2*time.Second); err != nil {
					t.Errorf("KeepAlive while the first stream holds its answers = %v, want success on a new stream", err)
				}
				if n := hs.opened(); n != 2 {
					t.Errorf("%d keep-alive streams opened, want 2 (the held one, then a new one)", n)
				}

				close(hs.release)
				if err := <-other; err != nil {
					t.Errorf("KeepAlive of another caller on the same stream = %v, want success: one caller giving up must not cost it its renewal", err)
				}
			})
		}
	})
}
