package lockers

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton/internal/bench"
)

// ErrPostgresNotHeld is returned by Release when pg_advisory_unlock says
// this connection did not hold the lock.
var ErrPostgresNotHeld = errors.New("postgres: advisory lock not held")

// AdvisoryKey is the pg_advisory_lock key of name: its 64-bit FNV-1a hash.
func AdvisoryKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}

// Postgres returns a factory whose workers each have one connection and
// lock with session-level pg_advisory_lock / pg_advisory_unlock on
// AdvisoryKey(name). Advisory locks live in the server's memory only: they
// are not written to the WAL, so the server's fsync setting does not touch
// them.
func Postgres(url string) bench.Factory {
	return func(ctx context.Context, _ int) (bench.Locker, error) {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return nil, fmt.Errorf("postgres connect: %w", err)
		}
		return &pgLocker{c: c}, nil
	}
}

// pgLocker is used by one worker goroutine only.
type pgLocker struct{ c *pgx.Conn }

// Acquire returns 0: advisory locks have no fencing token.
func (l *pgLocker) Acquire(ctx context.Context, name string) (uint64, error) {
	_, err := l.c.Exec(ctx, "SELECT pg_advisory_lock($1)", AdvisoryKey(name))
	return 0, err
}

func (l *pgLocker) Release(ctx context.Context, name string) error {
	var ok bool
	if err := l.c.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", AdvisoryKey(name)).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return ErrPostgresNotHeld
	}
	return nil
}

func (l *pgLocker) Close() error { return l.c.Close(context.Background()) }
