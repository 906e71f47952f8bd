package check_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/check"
)

// A store checks each call's arguments before it does anything, so that it
// accepts exactly what every other store accepts.
func Example() {
	for _, err := range []error{
		check.Write("claims/a", 0, []byte("v"), 5*time.Second),
		check.Write("claims/a", 0, make([]byte, backends.MaxValueBytes+1), 0),
		check.Revision(0, true), // CompareAndDelete and KeepAlive name a revision
		check.Txn(nil, []backends.Op{{Kind: backends.OpDelete, Key: "a"}, {Kind: backends.OpDelete, Key: "a"}}),
	} {
		fmt.Println(err == nil || errors.Is(err, backends.ErrInvalid), err)
	}
	// Output:
	// true <nil>
	// true check: value of 65537 bytes exceeds 65536: invalid argument
	// true check: revision 0 out of range: invalid argument
	// true check: txn writes "a" twice: invalid argument
}
