package allocator

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
)

// Defaults of Config.
const (
	DefaultMin   = 1
	DefaultMax   = math.MaxUint32
	DefaultTTL   = 30 * time.Second
	DefaultGrace = 2 * time.Minute
)

// ErrNoIDs is returned by Allocate when every ID in [Min, Max] is in use.
var ErrNoIDs = errors.New("no free ids")

// Config configures an Allocator. The zero value of each optional field
// selects its default.
type Config struct {
	// Prefix is prepended to every store key the allocator writes, e.g.
	// "ids/". Required. Allocators share IDs exactly when they share a store
	// and a Prefix; the prefixes of unrelated allocators on one store must
	// not begin with one another, or each would read the other's entries.
	Prefix string

	// Member is this process's configured identity, e.g. a host name.
	// Required; it may not contain "/". New adds a random nonce, so two
	// allocators configured with the same Member are still two members and
	// never renew or release each other's references.
	Member string

	// Min and Max bound the IDs handed out, both included. Defaults
	// DefaultMin and DefaultMax; Min above Max is refused. ID 0 is never
	// handed out.
	Min, Max uint64

	// TTL is the lifetime of this member's reference entries: if the process
	// stops renewing them (it died, or lost the store), its references lapse
	// TTL after their last renewal. Default DefaultTTL.
	TTL time.Duration

	// RenewInterval is how often references are renewed. Default TTL/3; it
	// must be shorter than TTL.
	RenewInterval time.Duration

	// Grace is how long an ID must stay unreferenced, as observed by the
	// garbage collector, before its entries are deleted and the ID returns
	// to the pool. Default DefaultGrace.
	Grace time.Duration

	// GCInterval is how often this allocator runs a garbage collection pass.
	// Default Grace/2; negative disables the background pass (RunGC still
	// works), for example where one process collects for everyone.
	GCInterval time.Duration

	// OnChange, if set, is called for every mapping that appears in or
	// disappears from the watched cache (see Event). It runs on the
	// allocator's watch goroutine, one call at a time, in the order the
	// store applied the changes, except that when the watch had to be
	// re-established, what changed meanwhile is reported as the difference
	// between the cache and a fresh listing (a mapping that came and went
	// in the gap is not reported). A slow OnChange delays the cache; it
	// must not call Close.
	OnChange func(Event)

	// Clock is the source of all time. Default clock.New(), the real clock.
	Clock clock.Clock

	// Logger receives structured logs (keys key, id, rev). Default discards.
	Logger *slog.Logger
}

// withDefaults returns c with every unset optional field set.
func (c Config) withDefaults() Config {
	if c.Min == 0 {
		c.Min = DefaultMin
	}
	if c.Max == 0 {
		c.Max = DefaultMax
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = c.TTL / 3
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.GCInterval == 0 {
		c.GCInterval = c.Grace / 2
	}
	if c.Clock == nil {
		c.Clock = clock.New()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first problem with c after defaults are applied, as
// an error wrapping backends.ErrInvalid.
func (c Config) Validate() error {
	c = c.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("allocator: config: "+format+": %w", append(args, backends.ErrInvalid)...)
	}
	switch {
	case c.Prefix == "":
		return bad("empty prefix")
	case c.Member == "":
		return bad("empty member")
	case strings.Contains(c.Member, "/"):
		return bad("member %q contains \"/\"", c.Member)
	case c.Min > c.Max:
		return bad("min %d above max %d", c.Min, c.Max)
	case c.TTL < 0:
		return bad("negative ttl %v", c.TTL)
	case c.RenewInterval <= 0 || c.RenewInterval >= c.TTL:
		return bad("renew interval %v not in (0, ttl %v)", c.RenewInterval, c.TTL)
	case c.Grace < 0:
		return bad("negative grace %v", c.Grace)
	}
	if err := backends.ValidateKey(c.Prefix); err != nil {
		return bad("prefix: %v", err)
	}
	if err := backends.ValidateKey(c.Member); err != nil {
		return bad("member: %v", err)
	}
	return nil
}
