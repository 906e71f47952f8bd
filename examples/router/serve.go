package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/shards"
)

const (
	group        = "router"
	shardCount   = 16
	forwardedHdr = "X-Router-Forwarded"
)

// dataKey is the store key holding shard's data.
func dataKey(shard int) string { return "data/" + strconv.Itoa(shard) }

// shardDoc is one shard's data, written whole by compare-and-set.
type shardDoc struct {
	Token  int64           `json:"token"`  // the highest token written here
	Tokens []int64         `json:"tokens"` // every token that wrote, in order
	Items  map[string]item `json:"items"`
}

type item struct {
	Value   string `json:"value"`
	Version int64  `json:"version"`
}

// readDoc returns shard's document and its revision (0 if absent).
func readDoc(ctx context.Context, store backends.Store, shard int) (shardDoc, int64, error) {
	doc := shardDoc{Items: map[string]item{}}
	e, err := store.Get(ctx, dataKey(shard))
	if errors.Is(err, backends.ErrNotFound) {
		return doc, 0, nil
	}
	if err != nil {
		return doc, 0, err
	}
	if err := json.Unmarshal(e.Value, &doc); err != nil {
		return doc, 0, fmt.Errorf("shard %d data: %v: %w", shard, err, backends.ErrCorrupt)
	}
	if doc.Items == nil {
		doc.Items = map[string]item{}
	}
	return doc, e.Revision, nil
}

// errFenced: the shard's data was written under a newer token.
var errFenced = errors.New("fenced: a newer owner has written this shard")

// writeDoc applies mutate to shard's document under token: it refuses
// (errFenced) if the document carries a newer token, and replaces the
// document by compare-and-set, so a newer owner's write in between makes it
// read again. mutate may refuse with its own error.
func writeDoc(ctx context.Context, store backends.Store, shard int, token int64, mutate func(*shardDoc) error) error {
	for {
		doc, rev, err := readDoc(ctx, store, shard)
		if err != nil {
			return err
		}
		if doc.Token > token {
			return errFenced
		}
		if err := mutate(&doc); err != nil {
			return err
		}
		if doc.Token != token {
			doc.Token = token
			doc.Tokens = append(doc.Tokens, token)
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		if rev == 0 {
			_, err = store.CreateIfAbsent(ctx, dataKey(shard), b, 0)
		} else {
			_, err = store.CompareAndSet(ctx, dataKey(shard), rev, b, 0)
		}
		if errors.Is(err, backends.ErrExists) || errors.Is(err, backends.ErrConflict) {
			continue // written meanwhile: read again
		}
		return err
	}
}

// server is one member's HTTP side.
type server struct {
	store  backends.Store
	member *shards.Member
	self   string
	client *http.Client

	mu    sync.Mutex
	owned map[int]*ownership // guarded by mu
	locks map[string]*keyLock
}

// ownership is a shard this member owns: its term, and the requests being
// served under it, which the shard's release waits for.
type ownership struct {
	term     elector.Term
	inFlight sync.WaitGroup
}

// keyLock serializes the writes of one key on its owner.
type keyLock struct {
	sync.Mutex
	refs int // guarded by server.mu
}

// onAcquired serves shard until the ownership ends, then waits for the
// requests in flight: the claim is released only after they finished.
func (s *server) onAcquired(ctx context.Context, shard int, term elector.Term) {
	o := &ownership{term: term}
	s.mu.Lock()
	s.owned[shard] = o
	s.mu.Unlock()
	<-ctx.Done()
	s.mu.Lock()
	delete(s.owned, shard)
	s.mu.Unlock()
	o.inFlight.Wait()
}

// own returns the ownership of shard with a request counted in, or nil if
// this member does not own it now.
func (s *server) own(shard int) *ownership {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.owned[shard]
	if o == nil {
		return nil
	}
	if t, ok := s.member.Term(shard); !ok || t.Token != o.term.Token {
		return nil
	}
	o.inFlight.Add(1)
	return o
}

func (s *server) lock(key string) *keyLock {
	s.mu.Lock()
	l := s.locks[key]
	if l == nil {
		l = &keyLock{}
		s.locks[key] = l
	}
	l.refs++
	s.mu.Unlock()
	l.Lock()
	return l
}

func (s *server) unlock(key string, l *keyLock) {
	l.Unlock()
	s.mu.Lock()
	if l.refs--; l.refs == 0 {
		delete(s.locks, key) // idle keys leave the table
	}
	s.mu.Unlock()
}

func retryable(w http.ResponseWriter, why string) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, why, http.StatusServiceUnavailable)
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, ok := strings.CutPrefix(r.URL.Path, "/kv/")
	if !ok || key == "" {
		http.NotFound(w, r)
		return
	}
	shard := s.member.ShardOf(key)
	o := s.own(shard)
	if o == nil {
		if r.Header.Get(forwardedHdr) != "" {
			retryable(w, fmt.Sprintf("shard %d: not the owner", shard))
			return
		}
		owner, ok := s.member.Owner(shard)
		if !ok || owner.Holder.ID == s.self {
			retryable(w, fmt.Sprintf("shard %d: no owner known", shard))
			return
		}
		s.forward(w, r, owner.Holder.ID)
		return
	}
	defer o.inFlight.Done()
	switch r.Method {
	case http.MethodGet:
		s.get(w, r, shard, key)
	case http.MethodPut:
		s.put(w, r, shard, key, o.term)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (s *server) get(w http.ResponseWriter, r *http.Request, shard int, key string) {
	doc, _, err := readDoc(r.Context(), s.store, shard)
	if err != nil {
		retryable(w, err.Error())
		return
	}
	it, ok := doc.Items[key]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(it.Version, 10)))
	_, _ = io.WriteString(w, it.Value)
}

// errPrecondition: the request's If-Match or If-None-Match failed.
var errPrecondition = errors.New("precondition failed")

func (s *server) put(w http.ResponseWriter, r *http.Request, shard int, key string, term elector.Term) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ifMatch, ifNone := r.Header.Get("If-Match"), r.Header.Get("If-None-Match")
	l := s.lock(key)
	defer s.unlock(key, l)
	var version int64
	err = writeDoc(r.Context(), s.store, shard, term.Token, func(doc *shardDoc) error {
		cur, exists := doc.Items[key]
		switch {
		case ifNone == "*" && exists:
			return errPrecondition
		case ifMatch != "" && (!exists || ifMatch != strconv.Quote(strconv.FormatInt(cur.Version, 10))):
			return errPrecondition
		}
		// Act only inside the term: checked last, right before the write.
		if t, ok := s.member.Term(shard); !ok || t.Token != term.Token {
			return errFenced
		}
		version = cur.Version + 1
		doc.Items[key] = item{Value: string(body), Version: version}
		return nil
	})
	switch {
	case errors.Is(err, errPrecondition):
		http.Error(w, err.Error(), http.StatusPreconditionFailed)
	case errors.Is(err, errFenced):
		retryable(w, err.Error())
	case err != nil:
		retryable(w, err.Error())
	default:
		w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(version, 10)))
		if version == 1 {
			w.WriteHeader(http.StatusCreated)
		}
	}
}

// forward sends r once to the owner at addr, marked so it goes no further.
func (s *server) forward(w http.ResponseWriter, r *http.Request, addr string) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+addr+r.URL.Path, r.Body)
	if err != nil {
		retryable(w, err.Error())
		return
	}
	req.Header = r.Header.Clone()
	req.Header.Set(forwardedHdr, s.self)
	resp, err := s.client.Do(req)
	if err != nil {
		retryable(w, "forward: "+err.Error())
		return
	}
	defer resp.Body.Close()
	for _, h := range []string{"ETag", "Retry-After", "Content-Type"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "the filestore directory the members share (required)")
	addr := fs.String("addr", "127.0.0.1:0", "the address to listen on; the member's identity is the address it got")
	ttl := fs.Duration("ttl", 2*time.Second, "the TTL of every claim")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "serve: --dir is required")
		return 2
	}
	if err := serve(*dir, *addr, *ttl, stdout); err != nil {
		fmt.Fprintln(stderr, "serve:", err)
		return 1
	}
	return 0
}

// serve runs one member until SIGTERM or SIGINT, then leaves the group
// gracefully.
func serve(dir, addr string, ttl time.Duration, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	store, err := filestore.Open(ctx, dir)
	if err != nil {
		return err
	}
	defer store.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s := &server{
		store:  store,
		self:   ln.Addr().String(),
		client: &http.Client{Timeout: 2 * time.Second},
		owned:  map[int]*ownership{},
		locks:  map[string]*keyLock{},
	}
	s.member, err = shards.New(store, shards.Config{
		Group:      group,
		Identity:   s.self,
		Count:      shardCount,
		Elector:    elector.Config{TTL: ttl, RenewPeriod: ttl / 4},
		OnAcquired: s.onAcquired,
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		ln.Close()
		return err
	}
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(stdout, "listening %s\n", s.self)
	// Run returns once the member has left: its shards drained (the
	// requests in flight answered) and released. The server keeps
	// answering until then, forwarding or refusing what it no longer owns.
	merr := s.member.Run(ctx)
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	herr := hs.Shutdown(stopCtx)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return errors.Join(merr, herr)
}
