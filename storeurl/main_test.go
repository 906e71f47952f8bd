package storeurl_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests of every scheme, the etcd and kube ones against real
// servers, are in tests/storeurl: this module links no store's client.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
