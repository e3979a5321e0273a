package server

// The flusher writes the answers of an applied batch to the streams on
// plain TCP framing, one goroutine for the batch, where each stream's
// sender would wake in turn to write its own. Its writes do not block: a
// socket that takes less than a whole message, a stream whose sender is
// busy, and a reply to sign (signing is costly, and the streams' senders
// do it in parallel) are left to the stream's sender, which it wakes.

// startFlusher starts the flusher once; it ends with the server (Stop).
func (s *Server) startFlusher() {
	s.flusherOnce.Do(func() { go s.runFlusher() })
}

func (s *Server) runFlusher() {
	var sts []*sessionsStream
	for {
		select {
		case <-s.hub.flushReady:
		case <-s.stopC:
			return
		}
		sts = s.hub.takeFlush(sts)
		for i, st := range sts {
			s.flushStream(st)
			sts[i] = nil
		}
	}
}

// flushStream sends what is queued on st without blocking, or wakes st's
// sender to.
func (s *Server) flushStream(st *sessionsStream) {
	if !st.sendMu.TryLock() {
		poke(st.ready) // it is sending: it looks again after
		return
	}
	if st.finished {
		st.sendMu.Unlock()
		return
	}
	wake := st.fast.pending() || st.signing()
	if !wake {
		wake = s.sendQueued((*nonBlocking)(st.fast), st) != nil || st.fast.pending()
	}
	st.sendMu.Unlock()
	if wake {
		poke(st.ready)
	}
}

// signing reports whether a queued reply carries grants to sign.
func (st *sessionsStream) signing() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, r := range st.queue {
		if r.sign != nil {
			return true
		}
	}
	return false
}
