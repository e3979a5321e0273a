// Package fence is for the owners of what a lock protects: the storage
// side of fencing. A lock alone cannot protect data: a holder that pauses
// (a GC pause, swapping, a slow disk or network) past its lease writes
// after the next holder has begun. Only the storage can stop that write,
// by refusing a token older than one it has already seen.
//
// Baton gives every grant a fencing token: the index of the log entry
// that granted it. Tokens increase across the whole cluster, so each new
// holder of a lock has a larger token than every earlier holder, and a
// token identifies one grant (a re-entry keeps its hold's token; holds
// granted by one entry, such as the permits of a semaphore granted
// together, share it). The client reads it from a Lease (Token, and Name
// for the lock); this package needs nothing else from Baton and imports
// none of it, so a storage service can take it alone.
//
// Pick the check by where the data lives:
//
//   - In a SQL database: keep the highest token written in a column of
//     the row and write with one conditional statement (Update, below;
//     package fencepgx for pgx). The database decides atomically with the
//     write, it survives restarts, and no service sits in between.
//   - Behind your own HTTP or gRPC service: Middleware here, and the
//     interceptors of package fencegrpc, read the lock and token a client
//     sends (LockHeader and TokenHeader, which Transport and SetHeaders
//     set from a Lease) and refuse stale ones (409 Conflict,
//     FailedPrecondition) with a Guard.
//   - Anywhere else in a process: a Guard, whose Do runs a write only for
//     a token as high as any seen for the resource.
//
// # The SQL pattern
//
// Give each fenced row a fence column, and make every write under the
// lock one statement that applies only while the stored fence is lower
// than or equal to the writer's token, and records the token:
//
//	ALTER TABLE inventory ADD COLUMN fence BIGINT NOT NULL DEFAULT 0;
//
//	-- PostgreSQL
//	UPDATE inventory SET stock = $1, fence = $3 WHERE (item = $2) AND fence <= $3;
//	-- MySQL, MariaDB
//	UPDATE inventory SET stock = ?, fence = ? WHERE (item = ?) AND fence <= ?;
//
// One row affected: the write applied. None: a newer holder wrote first,
// and this holder has lost the lock; it must not retry with the same
// token. The condition and the write are one statement, so no other
// writer comes between them: the database locks the row and decides on
// its latest committed version. PostgreSQL at READ COMMITTED (its
// default) waits for a concurrent writer and checks the condition again
// on the row it committed; at REPEATABLE READ or SERIALIZABLE it fails
// such an update with a serialization error instead; InnoDB's UPDATE
// reads the latest committed row at every level. A check in one
// statement and a write in another would leave a gap for a newer holder
// to write in.
//
// Update builds that statement for either dialect and Exec runs it on a
// *sql.DB, *sql.Tx or *sql.Conn, telling whether it applied; run it first
// in a transaction whose other writes must stand or fall with it:
//
//	tx, err := db.BeginTx(ctx, nil)
//	...
//	applied, err := fence.Update{
//		Table: "inventory", Set: "stock = $1", SetArgs: []any{stock - 1},
//		Where: "item = $2", WhereArgs: []any{item},
//	}.Exec(ctx, tx, fence.Postgres, lease.Token())
//	if err != nil || !applied {
//		tx.Rollback() // lost the lock (or failed): none of the writes happen
//		...
//	}
//	// ... the transaction's other writes ...
//	err = tx.Commit()
//
// With MySQL, have the driver report rows matched rather than rows changed
// (go-sql-driver/mysql: clientFoundRows=true): otherwise a write of the
// values already stored reports no row, as a refusal would.
//
// # Guards and semaphores
//
// A Guard (and so the middleware and interceptors) remembers one token
// per resource and refuses lower ones: it lets the newest holder of a
// lock write. That is right for a mutex and for the writers of a
// read/write lock. A semaphore has several holders at once, each with the
// token of its own grant: a Guard keyed by the semaphore's name would
// refuse all but the newest, so key it by what one holder owns alone.
// The same goes for the SQL pattern: fence a row that one holder writes.
package fence
