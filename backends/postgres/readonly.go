package postgres

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// readOnly reports whether err is the server refusing a write because it
// is read-only (25006): a standby, or a primary fenced by
// default_transaction_read_only. The connection that got it is useless to
// the store.
func readOnly(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "25006"
}

// discarder marks the connections of a pool the store opened that a
// server refused a write on as read-only, so that the pool closes them
// when they are released instead of handing them out again: their next
// connection goes to the server that is writable now (with
// target_session_attrs=read-write, the primary after a failover). It is
// the pool's tracer. It also tells the store (onReadOnly), whose
// listening connection may be on that server.
type discarder struct {
	onReadOnly atomic.Pointer[func()]
}

// readOnlyKey is the connection's custom data that marks it.
const readOnlyKey = "tenure.postgres.readonly"

func (d *discarder) mark(conn *pgx.Conn, err error) {
	if readOnly(err) {
		conn.PgConn().CustomData()[readOnlyKey] = true
		if f := d.onReadOnly.Load(); f != nil {
			(*f)()
		}
	}
}

// TraceQueryStart does nothing.
func (*discarder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

// TraceQueryEnd marks conn if its query was refused as a write on a
// read-only server.
func (d *discarder) TraceQueryEnd(_ context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	d.mark(conn, data.Err)
}

// TraceBatchStart does nothing.
func (*discarder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery marks conn if a query of its batch was refused as a
// write on a read-only server.
func (d *discarder) TraceBatchQuery(_ context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	d.mark(conn, data.Err)
}

// TraceBatchEnd marks conn if its batch was refused as a write on a
// read-only server.
func (d *discarder) TraceBatchEnd(_ context.Context, conn *pgx.Conn, data pgx.TraceBatchEndData) {
	d.mark(conn, data.Err)
}

// keep is the pool's AfterRelease: a marked connection is closed.
func keep(conn *pgx.Conn) bool {
	ro, _ := conn.PgConn().CustomData()[readOnlyKey].(bool)
	return !ro
}
