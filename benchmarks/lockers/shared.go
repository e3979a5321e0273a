package lockers

import (
	"context"
	"sync"
)

// sharedClient is one client that every worker's Locker uses, for the
// shared-connection variant: the first worker to acquire it dials, the
// last to release it closes it.
type sharedClient[C any] struct {
	dial  func(context.Context) (C, error)
	close func(C) error

	mu    sync.Mutex
	c     C
	users int
}

func (s *sharedClient[C]) acquire(ctx context.Context) (C, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users == 0 {
		c, err := s.dial(ctx)
		if err != nil {
			return c, err
		}
		s.c = c
	}
	s.users++
	return s.c, nil
}

func (s *sharedClient[C]) release() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users--
	if s.users > 0 {
		return nil
	}
	c := s.c
	var zero C
	s.c = zero
	return s.close(c)
}
