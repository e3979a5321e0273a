// Package fencepgx runs package fence's fenced UPDATE through pgx
// (github.com/jackc/pgx/v5) instead of database/sql, apart so that users
// of fence alone need not import pgx. The statement is fence.Update's for
// fence.Postgres: it applies only while the row's fence is lower than or
// equal to the caller's token, and records the token, in one statement.
package fencepgx

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batonlock/baton/fence"
)

// Execer runs a statement: *pgx.Conn, pgx.Tx and *pgxpool.Pool are
// Execers, so a fenced update can be one statement of a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Exec runs u with token on db and reports whether it applied: false when
// no row u.Where selects has a fence lower than or equal to token, that
// is when a newer holder wrote (or no row matches). In a transaction, run
// it first and roll back when it did not apply.
func Exec(ctx context.Context, db Execer, u fence.Update, token uint64) (applied bool, err error) {
	query, args, err := u.SQL(fence.Postgres, token)
	if err != nil {
		return false, err
	}
	tag, err := db.Exec(ctx, query, args...)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}
