//go:build !unix

package server

import (
	"errors"
	"net"
	"syscall"
)

// socketOf is nil here: only unix sockets take the flusher's
// non-blocking writes, so every framed stream's sender writes its own.
func socketOf(*net.TCPConn) syscall.RawConn { return nil }

// writeOnce is never called without a socket (socketOf).
func (st *connStream) writeOnce(uintptr) bool {
	st.tryN, st.tryErr = 0, errors.New("no non-blocking writes on this platform")
	return true
}
