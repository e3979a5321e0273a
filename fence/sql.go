package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Dialect is the SQL a database speaks for a fenced UPDATE: its
// placeholders.
type Dialect int

const (
	// Postgres numbers its placeholders ($1, $2, ...): Update.SetArgs
	// are $1..$k, Update.WhereArgs $k+1..$n, and the token is $n+1.
	Postgres Dialect = iota + 1
	// MySQL (and MariaDB) placeholders are ?: one per argument, in order.
	MySQL
)

// Update is a fenced UPDATE: it makes the assignments Set to the rows
// Where selects (one row, as a rule) and records the caller's token in
// FenceColumn, only where the stored fence is lower than or equal to the
// token, in one statement:
//
//	UPDATE Table SET Set, fence = $tok WHERE (Where) AND fence <= $tok
//
// The database decides, row by row and atomically with the write, so a
// holder whose lock passed to a newer holder that wrote cannot write
// after it, whatever the two processes do. The fence column is a BIGINT
// NOT NULL DEFAULT 0 of the fenced rows.
type Update struct {
	// Table is the table's name as SQL writes it (quote it if it needs
	// quotes).
	Table string
	// Set are the assignments, with the dialect's placeholders for
	// SetArgs: "stock = $1" (Postgres), "stock = ?" (MySQL).
	Set     string
	SetArgs []any
	// Where selects the rows, with placeholders for WhereArgs, which come
	// after SetArgs: "item = $2" (Postgres), "item = ?" (MySQL).
	Where     string
	WhereArgs []any
	// FenceColumn is the column keeping the highest token written; ""
	// means "fence".
	FenceColumn string
}

// Execer runs a statement: *sql.DB, *sql.Tx and *sql.Conn are Execers, so
// a fenced update can be one statement of a transaction.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// SQL is the statement and its arguments for the dialect d and the
// caller's token. A token is 1 to 2^63-1 (a BIGINT; Baton's are log
// indexes); 0 and larger ones are refused.
func (u Update) SQL(d Dialect, token uint64) (query string, args []any, err error) {
	if token == 0 || token > math.MaxInt64 {
		return "", nil, fmt.Errorf("fence: token %d is not from 1 to 2^63-1", token)
	}
	if u.Table == "" || u.Set == "" || u.Where == "" {
		return "", nil, errors.New("fence: a fenced update needs Table, Set and Where")
	}
	col := u.FenceColumn
	if col == "" {
		col = "fence"
	}
	tok := int64(token)
	switch d {
	case Postgres:
		p := "$" + strconv.Itoa(len(u.SetArgs)+len(u.WhereArgs)+1)
		query = "UPDATE " + u.Table + " SET " + u.Set + ", " + col + " = " + p +
			" WHERE (" + u.Where + ") AND " + col + " <= " + p
		args = append(append(append(args, u.SetArgs...), u.WhereArgs...), tok)
	case MySQL:
		query = "UPDATE " + u.Table + " SET " + u.Set + ", " + col + " = ?" +
			" WHERE (" + u.Where + ") AND " + col + " <= ?"
		args = append(append(append(append(args, u.SetArgs...), tok), u.WhereArgs...), tok)
	default:
		return "", nil, fmt.Errorf("fence: unknown SQL dialect %d", d)
	}
	return query, args, nil
}

// Exec runs the fenced update with token on db and reports whether it
// applied: false when no row Where selects has a fence lower than or
// equal to token, that is when a newer holder wrote (or no row matches).
// With MySQL, "applied" needs the driver to report rows matched, not rows
// changed (go-sql-driver/mysql: clientFoundRows=true in the DSN): else a
// holder writing the values already there is told it did not apply.
func (u Update) Exec(ctx context.Context, db Execer, d Dialect, token uint64) (applied bool, err error) {
	query, args, err := u.SQL(d, token)
	if err != nil {
		return false, err
	}
	res, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	return n > 0, nil
}
