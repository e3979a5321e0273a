package lockers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonlock/baton/internal/bench"
)

// Redis lock parameters. The lease must outlive any cycle of a run; the
// retry delays are short because a lock client that sleeps 50-250 ms
// between tries (redsync's default) would measure the sleep, not Redis.
const (
	RedisLease      = 30 * time.Second
	RedisRetryFirst = 50 * time.Microsecond
	RedisRetryMax   = 2 * time.Millisecond
)

// ErrRedisLost is returned by Release when the key no longer holds this
// worker's value: the lease expired or someone else deleted it.
var ErrRedisLost = errors.New("redis: lock lost before release")

// release deletes the key only if it still holds our value, so a worker
// whose lease expired cannot delete the next holder's lock.
var release = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then
	return redis.call("del", KEYS[1])
end
return 0`)

// Redis returns a factory whose workers each have their own client with a
// single connection. Acquire is SET name value NX PX lease, retried after
// a jittered exponential backoff (RedisRetryFirst doubling up to
// RedisRetryMax) until it succeeds; Release runs a compare-and-delete Lua
// script. This is the single-instance pattern of the Redis docs, not
// Redlock.
func Redis(addr string) bench.Factory {
	return func(ctx context.Context, worker int) (bench.Locker, error) {
		c := redis.NewClient(&redis.Options{
			Addr:            addr,
			PoolSize:        1,
			MinIdleConns:    1,
			DisableIdentity: true,
		})
		if err := c.Ping(ctx).Err(); err != nil {
			c.Close()
			return nil, fmt.Errorf("redis ping: %w", err)
		}
		if err := release.Load(ctx, c).Err(); err != nil {
			c.Close()
			return nil, fmt.Errorf("redis load script: %w", err)
		}
		return &redisLocker{c: c, rng: mrand.New(mrand.NewPCG(uint64(worker), 7)), held: map[string]string{}}, nil
	}
}

// redisLocker is used by one worker goroutine only.
type redisLocker struct {
	c    *redis.Client
	rng  *mrand.Rand
	held map[string]string // name -> random value
}

// Acquire returns 0: a Redis lock has no fencing token.
func (l *redisLocker) Acquire(ctx context.Context, name string) (uint64, error) {
	var b [16]byte
	rand.Read(b[:])
	val := hex.EncodeToString(b[:])
	backoff := RedisRetryFirst
	for {
		err := l.c.Do(ctx, "SET", name, val, "PX", RedisLease.Milliseconds(), "NX").Err()
		if err == nil {
			l.held[name] = val
			return 0, nil
		}
		if !errors.Is(err, redis.Nil) {
			return 0, err
		}
		t := time.NewTimer(time.Duration(l.rng.Int64N(int64(backoff)) + 1))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		}
		backoff = min(2*backoff, RedisRetryMax)
	}
}

func (l *redisLocker) Release(ctx context.Context, name string) error {
	val, ok := l.held[name]
	if !ok {
		return fmt.Errorf("redis: %s not held", name)
	}
	delete(l.held, name)
	n, err := release.Run(ctx, l.c, []string{name}, val).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrRedisLost
	}
	return nil
}

func (l *redisLocker) Close() error { return l.c.Close() }
