package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/check"
	"github.com/tenure-go/tenure/internal/closer"
)

var _ backends.Store = (*Store)(nil)

// API is the part of the DynamoDB client the store uses; *dynamodb.Client
// implements it.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

// Option configures Open.
type Option func(*options)

type options struct {
	clock      clock.Clock
	log        *slog.Logger
	create     bool
	sdkRetries bool
	transport  *http.Transport // the store's own, made by a URL's open
}

// withTransport makes the store own tr: Close ends its idle connections.
func withTransport(tr *http.Transport) Option { return func(o *options) { o.transport = tr } }

// WithClock makes c judge expiry: an entry expires once this clock has
// seen its item unchanged for the entry's TTL. Default: the real clock,
// whose Now carries the monotonic reading used for those intervals.
func WithClock(c clock.Clock) Option { return func(o *options) { o.clock = c } }

// WithLogger sends debug records about writes that raced other writers
// to l. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithCreateTable makes Open create the table if it does not exist (see
// CreateTable). Default: the table must exist.
func WithCreateTable() Option { return func(o *options) { o.create = true } }

// WithSDKRetries lets the client's retryer retry the store's reads and
// writes. Default: each read and write is one attempt, and its caller
// retries: an elector does, with its own jittered backoff, within its
// deadline. The SDK's default retryer waits up to seconds between
// attempts after throttling, which a holder spends from its lease, and it
// sends a write whose outcome is unknown again on its own.
func WithSDKRetries() Option { return func(o *options) { o.sdkRetries = true } }

// once makes a call a single attempt.
func once(o *dynamodb.Options) { o.Retryer = aws.NopRetryer{} }

// Attribute names of an item. They are short, and every expression names
// them through ExpressionAttributeNames, so that none is taken for one of
// DynamoDB's reserved words.
const (
	attrKey      = "k" // the tenure key; the table's partition key (S)
	attrRev      = "r" // revision (N)
	attrCreate   = "c" // create revision, 0 in a tombstone (N)
	attrBeat     = "b" // changes on every write and keep-alive (N)
	attrLive     = "l" // false in a tombstone (BOOL)
	attrTTL      = "t" // TTL in nanoseconds, 0 for none (N)
	attrValue    = "v" // the value; absent when empty (B)
	attrEmpty    = "e" // set when the value is empty but not nil (BOOL)
	attrRecorded = "w" // the writer's wall clock, Unix nanoseconds, for display (N)
)

// Store keeps tenure entries as items of one DynamoDB table, one item per
// key. It is safe for concurrent use. Close it when done: it deletes no
// item and does not close the client (an SDK client holds nothing to
// close).
type Store struct {
	api   API
	table string
	clock clock.Clock
	log   *slog.Logger
	call  []func(*dynamodb.Options) // per-call options of reads and writes
	own   *http.Transport           // closed by Close; nil if the client is the caller's

	mu      sync.Mutex
	seen    map[string]*sighting // by key; guarded by mu
	closing closer.Once          // marked under mu
}

// item is one item of the table, decoded.
type item struct {
	key      string
	live     bool
	rev      int64
	create   int64
	beat     int64
	ttl      time.Duration
	value    []byte
	recorded time.Time
}

// version is what a conditional write names: the item's revision and beat.
type version struct{ rev, beat int64 }

func (v version) less(o version) bool { return v.rev < o.rev || v.beat < o.beat }
func (v version) newer(o version) bool {
	return v.rev > o.rev || (v.rev == o.rev && v.beat > o.beat)
}

// sighting is the newest version of one item this store has seen, and
// since when, on s.clock, it has seen that version.
type sighting struct {
	it    item
	since time.Time
}

func (g sighting) version() version { return version{g.it.rev, g.it.beat} }

// Open returns a Store over table, reached through api. It asks for the
// table's description once (and creates the table first with
// WithCreateTable), and refuses a table whose key schema is not the
// store's with an error wrapping ErrSchema. An option given a value it
// cannot use is an error wrapping backends.ErrInvalid.
func Open(ctx context.Context, api API, table string, opts ...Option) (*Store, error) {
	if api == nil {
		return nil, fmt.Errorf("dynamodb: nil client: %w", backends.ErrInvalid)
	}
	if err := validTable(table); err != nil {
		return nil, err
	}
	o := options{}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.clock == nil {
		o.clock = clock.New()
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	if o.create {
		if err := CreateTable(ctx, api, table); err != nil {
			return nil, err
		}
	}
	if err := checkTable(ctx, api, table); err != nil {
		return nil, err
	}
	var call []func(*dynamodb.Options)
	if !o.sdkRetries {
		call = append(call, once)
	}
	return &Store{
		call:  call,
		own:   o.transport,
		api:   api,
		table: table,
		clock: o.clock,
		log:   o.log.With("backend", "dynamodb", "table", table),
		seen:  map[string]*sighting{},
	}, nil
}

// validTable checks a table name against DynamoDB's rule: 3 to 255
// letters, digits, '_', '-' and '.'.
func validTable(table string) error {
	if len(table) < 3 || len(table) > 255 {
		return fmt.Errorf("dynamodb: table name %q: want 3 to 255 characters: %w", table, backends.ErrInvalid)
	}
	for _, r := range table {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Errorf("dynamodb: table name %q: only letters, digits, '_', '-' and '.' are allowed: %w", table, backends.ErrInvalid)
		}
	}
	return nil
}

// CreateTable creates table with the key schema the store needs (a string
// partition key named "k") and on-demand billing, and waits until it is
// active. A table that exists already is left as it is (Open checks its
// schema).
func CreateTable(ctx context.Context, api API, table string) error {
	if err := validTable(table); err != nil {
		return err
	}
	_, err := api.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return mapError("create table", table, err)
	}
	// Wait for the table to become active, at most as long as ctx allows,
	// asking every 100 ms.
	for {
		out, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return mapError("create table", table, err)
		}
		if out.Table != nil && out.Table.TableStatus == types.TableStatusActive {
			return nil
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("dynamodb: create table %q: not active: %w: %w", table, backends.ErrUnavailable, ctx.Err())
		case <-t.C:
		}
	}
}

// checkTable refuses a missing table and one whose key schema is not a
// single string partition key named "k".
func checkTable(ctx context.Context, api API, table string) error {
	out, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return mapError("open table", table, err)
	}
	d := out.Table
	if d == nil {
		return fmt.Errorf("dynamodb: open table %q: no description: %w", table, backends.ErrUnavailable)
	}
	ok := len(d.KeySchema) == 1 && aws.ToString(d.KeySchema[0].AttributeName) == attrKey && d.KeySchema[0].KeyType == types.KeyTypeHash
	if ok {
		ok = false
		for _, a := range d.AttributeDefinitions {
			if aws.ToString(a.AttributeName) == attrKey && a.AttributeType == types.ScalarAttributeTypeS {
				ok = true
			}
		}
	}
	if !ok {
		return fmt.Errorf("dynamodb: open table %q: want a single string partition key %q and no sort key: %w", table, attrKey, ErrSchema)
	}
	return nil
}

// Table is the name of the store's table.
func (s *Store) Table() string { return s.table }

// Capabilities implements backends.Store. The store has no watch and no
// multi-key transactions.
func (s *Store) Capabilities() backends.Capabilities {
	return backends.Capabilities{
		Atomic: backends.CapCreateIfAbsent | backends.CapCompareAndSet |
			backends.CapCompareAndDelete | backends.CapKeepAlive,
		Scope:          backends.ScopeDistributed,
		ExpiryJudge:    "local observation: the item unchanged (same revision and beat) for the TTL on this process's monotonic clock",
		ObservedExpiry: true,
	}
}

func (s *Store) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Closed() {
		return backends.ErrClosed
	}
	return nil
}

// floor is the version of key this store had seen before it asked: an
// answer below it is history the table lost.
func (s *Store) floor(key string) (version, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.seen[key]
	if !ok {
		return version{}, false
	}
	return cur.version(), true
}

// errWentBack is returned when the table answers with an item older than
// one this store saw before it asked.
var errWentBack = errors.New("the table answered with an older version of the item than this store saw before (a restore, or a server that lost writes); every sighting starts counting again")

// observe records a version of an item seen by this store, read or written
// by a request sent when the store's newest sighting of it was floor
// (known false for none), and returns its sighting: since when this store
// has seen that version. A version older than floor is history the table
// lost: observe then restarts every sighting's count and returns an error
// wrapping backends.ErrUnavailable. A version older than one seen since
// the request was sent (a concurrent request of this store answered
// first) is returned as seen now and not recorded.
func (s *Store) observe(it item, floor version, known bool) (sighting, error) {
	v := version{it.rev, it.beat}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if known && v.less(floor) {
		for _, g := range s.seen {
			g.since = now
		}
		s.seen[it.key] = &sighting{it: it, since: now}
		return sighting{}, fmt.Errorf("dynamodb: %q at revision %d, beat %d, after revision %d, beat %d: %w: %w", it.key, v.rev, v.beat, floor.rev, floor.beat, backends.ErrUnavailable, errWentBack)
	}
	cur, ok := s.seen[it.key]
	switch {
	case !ok || v.newer(cur.version()):
		cur = &sighting{it: it, since: now}
		s.seen[it.key] = cur
	case v == cur.version():
		cur.it = it
	default:
		return sighting{it: it, since: now}, nil
	}
	return *cur, nil
}

// forget drops what was seen of key, found absent by a request sent when
// the newest sighting was floor, unless a later version was seen since.
func (s *Store) forget(key string, floor version, known bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.seen[key]; ok && (!known || !floor.less(cur.version())) {
		delete(s.seen, key)
	}
}

func (s *Store) cached(key string) (sighting, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.seen[key]
	if !ok {
		return sighting{}, false
	}
	return *cur, true
}

// view is one item as the store judges it now.
type view struct {
	sighting
	cached bool // judged on the store's last sighting, not a read just made
	found  bool // an item exists, live or a tombstone
	live   bool // present and not expired by local observation
	entry  backends.Entry
}

// judge decides whether a sighting is live: present, and either without a
// TTL or seen unchanged for less than its TTL.
func (s *Store) judge(g sighting) view {
	v := view{sighting: g, found: true, live: g.it.live}
	if !g.it.live {
		return v
	}
	v.entry = backends.Entry{
		Key:            g.it.key,
		Value:          g.it.value,
		Revision:       g.it.rev,
		CreateRevision: g.it.create,
		TTL:            g.it.ttl,
		Recorded:       g.it.recorded,
	}
	if g.it.ttl > 0 {
		seenFor := s.clock.Since(g.since)
		if seenFor >= g.it.ttl {
			v.live = false
		} else {
			v.entry.Remaining = g.it.ttl - seenFor
		}
	}
	if v.entry.Value != nil {
		v.entry.Value = append([]byte(nil), v.entry.Value...)
	}
	return v
}

// read gets key's item with a consistent read and judges it.
func (s *Store) read(ctx context.Context, op, key string) (view, error) {
	floor, known := s.floor(key)
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            map[string]types.AttributeValue{attrKey: &types.AttributeValueMemberS{Value: key}},
		ConsistentRead: aws.Bool(true),
	}, s.call...)
	if err != nil {
		return view{}, mapError(op, key, err)
	}
	if len(out.Item) == 0 {
		s.forget(key, floor, known)
		return view{}, nil
	}
	it, err := decode(out.Item)
	if err != nil {
		return view{}, fmt.Errorf("dynamodb: %s %q: %w", op, key, err)
	}
	if it.key != key {
		return view{}, fmt.Errorf("dynamodb: %s %q: the item read holds key %q: %w", op, key, it.key, backends.ErrCorrupt)
	}
	g, err := s.observe(it, floor, known)
	if err != nil {
		return view{}, err
	}
	return s.judge(g), nil
}

// Get implements backends.Store. It always reads the item, consistently.
func (s *Store) Get(ctx context.Context, key string) (backends.Entry, error) {
	if err := backends.ValidateKey(key); err != nil {
		return backends.Entry{}, fmt.Errorf("dynamodb: get: %w", err)
	}
	if err := s.checkOpen(); err != nil {
		return backends.Entry{}, fmt.Errorf("dynamodb: get %q: %w", key, err)
	}
	v, err := s.read(ctx, "get", key)
	if err != nil {
		return backends.Entry{}, err
	}
	if !v.live {
		return backends.Entry{}, fmt.Errorf("dynamodb: get %q: %w", key, backends.ErrNotFound)
	}
	return v.entry, nil
}

// List implements backends.Store. It scans the whole table with
// consistent reads, page by page, and keeps the keys that start with
// prefix: its cost grows with the table, not with what it returns.
func (s *Store) List(ctx context.Context, prefix string) ([]backends.Entry, error) {
	if err := backends.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("dynamodb: list: %w", err)
	}
	if err := s.checkOpen(); err != nil {
		return nil, fmt.Errorf("dynamodb: list %q: %w", prefix, err)
	}
	floors := s.floors()
	in := &dynamodb.ScanInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true)}
	if prefix != "" {
		in.FilterExpression = aws.String("begins_with(#k, :p)")
		in.ExpressionAttributeNames = map[string]string{"#k": attrKey}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: prefix}}
	}
	var items []item
	for {
		out, err := s.api.Scan(ctx, in, s.call...)
		if err != nil {
			return nil, mapError("list", prefix, err)
		}
		for _, raw := range out.Items {
			it, err := decode(raw)
			if err != nil {
				return nil, fmt.Errorf("dynamodb: list %q: %w", prefix, err)
			}
			if strings.HasPrefix(it.key, prefix) {
				items = append(items, it)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	var out []backends.Entry
	listed := make(map[string]bool, len(items))
	for _, it := range items {
		listed[it.key] = true
		floor, known := floors[it.key]
		g, err := s.observe(it, floor, known)
		if err != nil {
			return nil, fmt.Errorf("dynamodb: list %q: %w", prefix, err)
		}
		if v := s.judge(g); v.live {
			out = append(out, v.entry)
		}
	}
	for key, floor := range floors {
		if strings.HasPrefix(key, prefix) && !listed[key] {
			s.forget(key, floor, true)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// floors is every key's floor (see floor).
func (s *Store) floors() map[string]version {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]version, len(s.seen))
	for k, g := range s.seen {
		m[k] = g.version()
	}
	return m
}

// errStale makes mutate read again before it decides.
var errStale = errors.New("decided on an old sighting")

// maxAttempts bounds the read-modify-write loop of one operation. Each
// retry follows a conditional write that another writer's write made fail;
// the next read normally settles the outcome.
const maxAttempts = 8

// write is what a mutation asks to write over the item it was decided on.
type write struct {
	kind  writeKind
	value []byte
	ttl   time.Duration
}

type writeKind int

const (
	writeCreate    writeKind = iota + 1 // a new entry: a new create revision
	writeSet                            // a new value, the same create revision
	writeDelete                         // a tombstone
	writeKeepAlive                      // the same revision and value, a new beat and TTL
)

// mutation decides, from the current view of a key, what to write; or
// returns a final result without writing (a conflict).
type mutation func(v view) (write, error)

// mutate runs the read-modify-write loop of every conditional write: judge
// the current item, decide, and write the next item under a condition
// naming the revision and beat decided on (or the item's absence). A
// failed condition sends it round again with a fresh read.
//
// The first round may decide from the newest version this store has seen
// instead of reading: the condition makes that safe, and a leader's
// keep-alive then costs one request. Only a fresh read may end the loop
// with a conflict.
func (s *Store) mutate(ctx context.Context, op, key string, decide mutation) (backends.Entry, error) {
	if err := s.checkOpen(); err != nil {
		return backends.Entry{}, fmt.Errorf("dynamodb: %s %q: %w", op, key, err)
	}
	for attempt := 0; attempt < maxAttempts; attempt++ {
		var v view
		cached := false
		if g, ok := s.cached(key); ok && attempt == 0 {
			v, cached = s.judge(g), true
			v.cached = true
		} else {
			var err error
			if v, err = s.read(ctx, op, key); err != nil {
				return backends.Entry{}, err
			}
		}
		w, err := decide(v)
		if err != nil {
			if cached {
				continue // confirm with a fresh read before reporting
			}
			return backends.Entry{}, fmt.Errorf("dynamodb: %w", err)
		}
		e, retry, err := s.put(ctx, op, key, v, w)
		if err != nil || !retry {
			return e, err
		}
		s.log.Debug("dynamodb: write raced another writer; reading again", "op", op, "key", key, "attempt", attempt+1)
	}
	return backends.Entry{}, fmt.Errorf("dynamodb: %s %q: %d attempts raced other writers: %w", op, key, maxAttempts, backends.ErrUnavailable)
}

// put writes the item w makes of v's, on condition that the item is still
// the one v saw. retry reports a failed condition.
func (s *Store) put(ctx context.Context, op, key string, v view, w write) (e backends.Entry, retry bool, err error) {
	old := v.it
	next := item{key: key, live: true, rev: old.rev, create: old.create, beat: old.beat + 1, ttl: w.ttl, value: w.value}
	switch w.kind {
	case writeCreate:
		next.rev = old.rev + 1
		next.create = next.rev
	case writeSet:
		next.rev = old.rev + 1
	case writeDelete:
		next = item{key: key, rev: old.rev + 1, beat: old.beat + 1}
	case writeKeepAlive:
		next.value = old.value
	}
	next.recorded = s.clock.Now()
	in := &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     encode(next),
		ExpressionAttributeNames: map[string]string{"#k": attrKey},
	}
	if v.found {
		in.ConditionExpression = aws.String("#r = :r AND #b = :b")
		in.ExpressionAttributeNames = map[string]string{"#r": attrRev, "#b": attrBeat}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":r": num(old.rev), ":b": num(old.beat)}
	} else {
		in.ConditionExpression = aws.String("attribute_not_exists(#k)")
	}
	floor := version{old.rev, old.beat}
	if _, err := s.api.PutItem(ctx, in, s.call...); err != nil {
		if conditionFailed(err) {
			return backends.Entry{}, true, nil
		}
		return backends.Entry{}, false, mapError(op, key, err)
	}
	g, err := s.observe(next, floor, v.found)
	if err != nil {
		return backends.Entry{}, false, err
	}
	return s.judge(g).entry, false, nil
}

// CreateIfAbsent implements backends.Store. An item that is absent, a
// tombstone, or expired by local observation is written over; the new
// entry's revision and create revision are one above the item's last
// revision.
func (s *Store) CreateIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	if err := check.Write(key, 0, value, ttl); err != nil {
		return backends.Entry{}, fmt.Errorf("dynamodb: create: %w", err)
	}
	return s.create(ctx, "create", key, value, ttl)
}

func (s *Store) create(ctx context.Context, op, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	value = clone(value)
	return s.mutate(ctx, op, key, func(v view) (write, error) {
		if v.live {
			return write{}, &backends.ConflictError{Op: op, Key: key, Current: v.entry, Found: true}
		}
		if v.cached && v.it.live {
			// Expired on an old sighting: a follower's next attempt comes
			// a TTL after its last read, and the holder has most likely
			// renewed since. Read first rather than send a write whose
			// condition fails (on AWS a refused conditional write still
			// costs a write).
			return write{}, errStale
		}
		return write{kind: writeCreate, value: value, ttl: ttl}, nil
	})
}

// CompareAndSet implements backends.Store. The entry keeps its
// CreateRevision; its Revision goes up by one.
func (s *Store) CompareAndSet(ctx context.Context, key string, rev int64, value []byte, ttl time.Duration) (backends.Entry, error) {
	if err := check.Write(key, rev, value, ttl); err != nil {
		return backends.Entry{}, fmt.Errorf("dynamodb: cas: %w", err)
	}
	if rev == 0 {
		return s.create(ctx, "cas", key, value, ttl)
	}
	value = clone(value)
	return s.mutate(ctx, "cas", key, func(v view) (write, error) {
		if err := expect(v, "cas", key, rev); err != nil {
			return write{}, err
		}
		return write{kind: writeSet, value: value, ttl: ttl}, nil
	})
}

// CompareAndDelete implements backends.Store. The item is not deleted: it
// becomes a tombstone that keeps the key's last revision, so that it reads
// as absent and the next create still gets a higher revision than every
// one the key had.
func (s *Store) CompareAndDelete(ctx context.Context, key string, rev int64) error {
	if err := backends.ValidateKey(key); err != nil {
		return fmt.Errorf("dynamodb: delete: %w", err)
	}
	if err := check.Revision(rev, true); err != nil {
		return fmt.Errorf("dynamodb: delete %q: %w", key, err)
	}
	expired := false
	_, err := s.mutate(ctx, "delete", key, func(v view) (write, error) {
		expired = false
		if v.found && v.it.live && !v.live && v.it.rev == rev {
			// Expired here at rev: absent for this store, which says so,
			// as for any absent key. The tombstone harms nobody (any
			// store could have taken the entry over) and shows the
			// expiry to every other store at once.
			expired = true
			return write{kind: writeDelete}, nil
		}
		if err := expect(v, "delete", key, rev); err != nil {
			return write{}, err
		}
		return write{kind: writeDelete}, nil
	})
	if err == nil && expired {
		return fmt.Errorf("dynamodb: %w", &backends.ConflictError{Op: "delete", Key: key, Expected: rev})
	}
	return err
}

// KeepAlive implements backends.Store. It writes a new beat and the TTL,
// which makes every observer restart its expiry count, and leaves the
// revision and the value as they were.
func (s *Store) KeepAlive(ctx context.Context, key string, rev int64, ttl time.Duration) (backends.Entry, error) {
	if err := backends.ValidateKey(key); err != nil {
		return backends.Entry{}, fmt.Errorf("dynamodb: keepalive: %w", err)
	}
	if err := check.Revision(rev, true); err != nil {
		return backends.Entry{}, fmt.Errorf("dynamodb: keepalive %q: %w", key, err)
	}
	if err := check.KeepAliveTTL(ttl); err != nil {
		return backends.Entry{}, fmt.Errorf("dynamodb: keepalive %q: %w", key, err)
	}
	return s.mutate(ctx, "keepalive", key, func(v view) (write, error) {
		if err := expect(v, "keepalive", key, rev); err != nil {
			return write{}, err
		}
		return write{kind: writeKeepAlive, ttl: ttl}, nil
	})
}

// expect returns a *ConflictError unless v is live at revision rev.
func expect(v view, op, key string, rev int64) error {
	switch {
	case !v.live:
		return &backends.ConflictError{Op: op, Key: key, Expected: rev}
	case v.entry.Revision != rev:
		return &backends.ConflictError{Op: op, Key: key, Expected: rev, Current: v.entry, Found: true}
	}
	return nil
}

// Close implements backends.Store. Close marks the store closed, so that
// every later call fails with backends.ErrClosed, and, for a store opened
// by URL, ends its client's idle connections. It deletes no item. A client
// given to Open is the caller's: the store holds no goroutine and no
// connection of its own.
func (s *Store) Close() error {
	return s.closing.Close(&s.mu, func() error {
		if s.own != nil {
			s.own.CloseIdleConnections()
		}
		return nil
	})
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// encode is it as an item of the table.
func encode(it item) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{
		attrKey:      &types.AttributeValueMemberS{Value: it.key},
		attrRev:      num(it.rev),
		attrCreate:   num(it.create),
		attrBeat:     num(it.beat),
		attrLive:     &types.AttributeValueMemberBOOL{Value: it.live},
		attrTTL:      num(int64(it.ttl)),
		attrRecorded: num(it.recorded.UnixNano()),
	}
	switch {
	case len(it.value) > 0:
		m[attrValue] = &types.AttributeValueMemberB{Value: it.value}
	case it.value != nil:
		m[attrEmpty] = &types.AttributeValueMemberBOOL{Value: true}
	}
	return m
}

// decode reads an item of the table. An item that lacks what the store
// writes, or holds values it never writes, is corrupt: the store fails
// closed on it rather than read it as absent.
func decode(m map[string]types.AttributeValue) (item, error) {
	var it item
	k, ok := m[attrKey].(*types.AttributeValueMemberS)
	if !ok {
		return item{}, fmt.Errorf("an item without a string key attribute %q: %w", attrKey, backends.ErrCorrupt)
	}
	it.key = k.Value
	bad := func(what string) error {
		return fmt.Errorf("item %q: attribute %q %s: %w", it.key, what, "missing or malformed", backends.ErrCorrupt)
	}
	ints := []struct {
		name string
		dst  *int64
	}{{attrRev, &it.rev}, {attrCreate, &it.create}, {attrBeat, &it.beat}}
	for _, f := range ints {
		n, ok := m[f.name].(*types.AttributeValueMemberN)
		if !ok {
			return item{}, bad(f.name)
		}
		x, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil || x < 0 {
			return item{}, bad(f.name)
		}
		*f.dst = x
	}
	l, ok := m[attrLive].(*types.AttributeValueMemberBOOL)
	if !ok {
		return item{}, bad(attrLive)
	}
	it.live = l.Value
	t, ok := m[attrTTL].(*types.AttributeValueMemberN)
	if !ok {
		return item{}, bad(attrTTL)
	}
	ttl, err := strconv.ParseInt(t.Value, 10, 64)
	if err != nil || ttl < 0 || time.Duration(ttl) > backends.MaxTTL {
		return item{}, bad(attrTTL)
	}
	it.ttl = time.Duration(ttl)
	if w, ok := m[attrRecorded].(*types.AttributeValueMemberN); ok {
		if ns, err := strconv.ParseInt(w.Value, 10, 64); err == nil && ns > 0 {
			it.recorded = time.Unix(0, ns)
		}
	}
	if it.rev < 1 || it.beat < 1 || (it.live && (it.create < 1 || it.create > it.rev)) {
		return item{}, fmt.Errorf("item %q: revision %d, create revision %d, beat %d out of range: %w", it.key, it.rev, it.create, it.beat, backends.ErrCorrupt)
	}
	if v, ok := m[attrValue]; ok {
		b, ok := v.(*types.AttributeValueMemberB)
		if !ok {
			return item{}, bad(attrValue)
		}
		it.value = b.Value
	} else if _, ok := m[attrEmpty]; ok {
		it.value = []byte{}
	}
	if !it.live {
		it.value, it.ttl, it.create = nil, 0, 0
	}
	return it, nil
}
