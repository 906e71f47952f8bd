package dynamodb_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/dynamodb"
	"github.com/tenure-go/tenure/backends/dynamodb/dynamotest"
)

// counting is a client that counts the store's requests.
type counting struct {
	*awsdynamodb.Client
	gets, puts, scans atomic.Int64
	beforePut         atomic.Pointer[func()] // run once, before the next PutItem is sent
}

func (c *counting) GetItem(ctx context.Context, in *awsdynamodb.GetItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.GetItemOutput, error) {
	c.gets.Add(1)
	return c.Client.GetItem(ctx, in, opts...)
}

func (c *counting) PutItem(ctx context.Context, in *awsdynamodb.PutItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.PutItemOutput, error) {
	c.puts.Add(1)
	if f := c.beforePut.Swap(nil); f != nil {
		(*f)()
	}
	return c.Client.PutItem(ctx, in, opts...)
}

func (c *counting) Scan(ctx context.Context, in *awsdynamodb.ScanInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.ScanOutput, error) {
	c.scans.Add(1)
	return c.Client.Scan(ctx, in, opts...)
}

func (c *counting) total() int64 { return c.gets.Load() + c.puts.Load() + c.scans.Load() }

// openWith opens a store over table through api, closed when t ends.
func openWith(t *testing.T, api dynamodb.API, table string, opts ...dynamodb.Option) *dynamodb.Store {
	t.Helper()
	st, err := dynamodb.Open(within(t, 30*time.Second), api, table, append([]dynamodb.Option{dynamodb.WithCreateTable()}, opts...)...)
	if err != nil {
		t.Fatalf("Open(%s): %v", table, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestExpiryByLocalObservation checks that expiry follows the observing
// store's own clock and nothing else. A contender whose clock runs a year
// ahead of the holder's still sees a claim it reads for the first time as
// live, for a full TTL; a keep-alive it sees starts its count again; only
// once it has seen the item unchanged for the TTL may it take the claim,
// with a higher token, and the holder's next keep-alive is then lost.
func TestExpiryByLocalObservation(t *testing.T) {
	srv := dynamotest.Start(t)
	tbl := dynamotest.NewTable()
	holderClock, contenderClock := clock.NewMock(), clock.NewMock()
	contenderClock.Set(time.Now().Add(365 * 24 * time.Hour))
	holder := open(t, srv.Endpoint(), tbl, dynamodb.WithClock(holderClock))
	contender := open(t, srv.Endpoint(), tbl, dynamodb.WithClock(contenderClock))
	ctx := within(t, 30*time.Second)
	const ttl = 10 * time.Second
	e, err := holder.CreateIfAbsent(ctx, "claim", []byte("holder"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	got, err := contender.Get(ctx, "claim")
	if err != nil || got.Remaining != ttl {
		t.Fatalf("contender's first Get = %+v, %v; want live with the full TTL remaining", got, err)
	}
	contenderClock.Add(ttl - time.Second)
	if got, err := contender.Get(ctx, "claim"); err != nil || got.Remaining != time.Second {
		t.Fatalf("contender's Get %v later = %+v, %v; want live, 1s remaining", ttl-time.Second, got, err)
	}
	if _, err := holder.KeepAlive(ctx, "claim", e.Revision, ttl); err != nil {
		t.Fatal(err)
	}
	contenderClock.Add(time.Second)
	if got, err := contender.Get(ctx, "claim"); err != nil || got.Remaining != ttl {
		t.Fatalf("contender's Get after a keep-alive = %+v, %v; want live with the full TTL again", got, err)
	}
	if _, err := contender.CreateIfAbsent(ctx, "claim", []byte("contender"), ttl); !errors.Is(err, backends.ErrExists) {
		t.Fatalf("contender's CreateIfAbsent over a live claim = %v, want ErrExists", err)
	}
	contenderClock.Add(ttl)
	if _, err := contender.Get(ctx, "claim"); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("contender's Get a TTL after the last change it saw = %v, want ErrNotFound", err)
	}
	taken, err := contender.CreateIfAbsent(ctx, "claim", []byte("contender"), ttl)
	if err != nil || taken.CreateRevision <= e.CreateRevision {
		t.Fatalf("contender's takeover = %+v, %v; want a token above %d", taken, err, e.CreateRevision)
	}
	if _, err := holder.KeepAlive(ctx, "claim", e.Revision, ttl); backends.Classify(err) != backends.ClassLost {
		t.Fatalf("holder's KeepAlive after the takeover = %v, want class lost", err)
	}
}

// TestTakeoverNamesTheBeat checks that a takeover is conditioned on the
// beat it saw unchanged, not only on the revision: the contender has seen
// the claim unchanged for its TTL, and the holder keeps it alive (the
// revision stays, the beat changes) after the contender's last read and
// before its takeover is sent. The takeover must fail, the contender find
// the claim live, and the holder's keep-alive hold.
func TestTakeoverNamesTheBeat(t *testing.T) {
	srv := dynamotest.Start(t)
	tbl := dynamotest.NewTable()
	contenderClock := clock.NewMock()
	holder := open(t, srv.Endpoint(), tbl)
	api := &counting{Client: srv.Client(t)}
	contender := openWith(t, api, tbl, dynamodb.WithClock(contenderClock))
	ctx := within(t, 30*time.Second)
	const ttl = 10 * time.Second
	e, err := holder.CreateIfAbsent(ctx, "claim", []byte("holder"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := contender.Get(ctx, "claim"); err != nil {
		t.Fatal(err)
	}
	contenderClock.Add(ttl)
	var renewErr error
	renew := func() { _, renewErr = holder.KeepAlive(ctx, "claim", e.Revision, ttl) }
	api.beforePut.Store(&renew)
	_, err = contender.CreateIfAbsent(ctx, "claim", []byte("contender"), ttl)
	if renewErr != nil || api.beforePut.Load() != nil {
		t.Fatalf("the holder's keep-alive before the takeover: %v (ran: %v)", renewErr, api.beforePut.Load() == nil)
	}
	var ce *backends.ConflictError
	if !errors.As(err, &ce) || !ce.Found || string(ce.Current.Value) != "holder" {
		t.Fatalf("contender's takeover sent after a keep-alive it had not seen = %v, want a conflict with the holder's live claim", err)
	}
	if _, err := holder.KeepAlive(ctx, "claim", e.Revision, ttl); err != nil {
		t.Fatalf("holder's KeepAlive after the refused takeover: %v", err)
	}
}

// TestOneRequestPerRenewal counts the requests of a holder's keep-alives:
// one PutItem each, decided on what the store last saw.
func TestOneRequestPerRenewal(t *testing.T) {
	srv := dynamotest.Start(t)
	api := &counting{Client: srv.Client(t)}
	st := openWith(t, api, dynamotest.NewTable())
	ctx := within(t, 30*time.Second)
	e, err := st.CreateIfAbsent(ctx, "claim", []byte("v"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before := api.total()
	const n = 20
	for range n {
		if _, err := st.KeepAlive(ctx, "claim", e.Revision, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if got := api.total() - before; got != n {
		t.Errorf("%d keep-alives sent %d requests, want %d", n, got, n)
	}
}

// putRaw writes an item as another program would, through c.
func putRaw(t *testing.T, c *awsdynamodb.Client, table string, item map[string]types.AttributeValue) {
	t.Helper()
	if _, err := c.PutItem(within(t, 30*time.Second), &awsdynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// TestItemGoingBack checks that an item read below a version the store saw
// before it asked (a restore put an older copy back) is not judged: the
// read is ErrUnavailable, and the store counts afresh from there, so the
// older copy is live for a full TTL.
func TestItemGoingBack(t *testing.T) {
	srv := dynamotest.Start(t)
	tbl := dynamotest.NewTable()
	c := srv.Client(t)
	clk := clock.NewMock()
	st := open(t, srv.Endpoint(), tbl, dynamodb.WithClock(clk))
	ctx := within(t, 30*time.Second)
	e1, err := st.CreateIfAbsent(ctx, "k", []byte("one"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	old, err := c.GetItem(ctx, &awsdynamodb.GetItemInput{TableName: aws.String(tbl), Key: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "k"}}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CompareAndSet(ctx, "k", e1.Revision, []byte("two"), time.Minute); err != nil {
		t.Fatal(err)
	}
	putRaw(t, c, tbl, old.Item) // the older copy, back
	if _, err := st.Get(ctx, "k"); !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("Get of an item gone back = %v, want ErrUnavailable", err)
	}
	clk.Add(59 * time.Second)
	if got, err := st.Get(ctx, "k"); err != nil || string(got.Value) != "one" || got.Remaining != time.Second {
		t.Fatalf("Get after the count restarted = %+v, %v; want the older copy, live, 1s left", got, err)
	}
}

// TestCorruptItem checks that an item the store cannot read is an error
// wrapping ErrCorrupt (fatal), never an absent key that a create would
// write over.
func TestCorruptItem(t *testing.T) {
	srv := dynamotest.Start(t)
	tbl := dynamotest.NewTable()
	c := srv.Client(t)
	st := open(t, srv.Endpoint(), tbl)
	ctx := within(t, 30*time.Second)
	putRaw(t, c, tbl, map[string]types.AttributeValue{
		"k": &types.AttributeValueMemberS{Value: "k"},
		"r": &types.AttributeValueMemberS{Value: "not a number"},
	})
	if _, err := st.Get(ctx, "k"); !errors.Is(err, backends.ErrCorrupt) || backends.Classify(err) != backends.ClassFatal {
		t.Errorf("Get of a corrupt item = %v, want ErrCorrupt, fatal", err)
	}
	if _, err := st.CreateIfAbsent(ctx, "k", nil, time.Second); !errors.Is(err, backends.ErrCorrupt) {
		t.Errorf("CreateIfAbsent over a corrupt item = %v, want ErrCorrupt", err)
	}
	if _, err := st.List(ctx, ""); !errors.Is(err, backends.ErrCorrupt) {
		t.Errorf("List over a corrupt item = %v, want ErrCorrupt", err)
	}
}

// TestMissingTable checks that a table deleted under an open store makes
// its calls fail with ErrMissingResource, fatal.
func TestMissingTable(t *testing.T) {
	srv := dynamotest.Start(t)
	tbl := dynamotest.NewTable()
	c := srv.Client(t)
	st := open(t, srv.Endpoint(), tbl)
	ctx := within(t, 30*time.Second)
	if _, err := c.DeleteTable(ctx, &awsdynamodb.DeleteTableInput{TableName: aws.String(tbl)}); err != nil {
		t.Fatal(err)
	}
	// dynalite marks the table DELETING before DeleteTable answers, and
	// answers a table DELETING or gone with ResourceNotFoundException.
	_, err := st.Get(ctx, "k")
	if !errors.Is(err, backends.ErrMissingResource) || backends.Classify(err) != backends.ClassFatal {
		t.Errorf("Get on a deleted table = %v, want ErrMissingResource, fatal", err)
	}
}

// TestFollowerReadsBeforeTakeover checks what a follower's attempt costs
// when it comes a TTL after its last read, as the elector times it, and
// the holder has renewed meanwhile: one GetItem, and no write. Decided on
// its old sighting, the attempt sent a takeover whose condition failed (a
// write DynamoDB charges) before it read; with 100 claims that load lost
// leaders their claims.
func TestFollowerReadsBeforeTakeover(t *testing.T) {
	srv := dynamotest.Start(t)
	tbl := dynamotest.NewTable()
	clk := clock.NewMock()
	holder := open(t, srv.Endpoint(), tbl)
	api := &counting{Client: srv.Client(t)}
	follower := openWith(t, api, tbl, dynamodb.WithClock(clk))
	ctx := within(t, 30*time.Second)
	const ttl = 10 * time.Second
	e, err := holder.CreateIfAbsent(ctx, "claim", []byte("holder"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := follower.CreateIfAbsent(ctx, "claim", []byte("follower"), ttl); !errors.Is(err, backends.ErrExists) {
		t.Fatalf("follower's first attempt = %v, want ErrExists", err)
	}
	if _, err := holder.KeepAlive(ctx, "claim", e.Revision, ttl); err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl)
	gets, puts := api.gets.Load(), api.puts.Load()
	if _, err := follower.CreateIfAbsent(ctx, "claim", []byte("follower"), ttl); !errors.Is(err, backends.ErrExists) {
		t.Fatalf("follower's attempt a TTL later = %v, want ErrExists (the holder renewed)", err)
	}
	if g, p := api.gets.Load()-gets, api.puts.Load()-puts; g != 1 || p != 0 {
		t.Errorf("follower's attempt sent %d GetItem and %d PutItem, want 1 and 0", g, p)
	}
}
