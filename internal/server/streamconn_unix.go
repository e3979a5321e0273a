//go:build unix

package server

import (
	"net"
	"syscall"
)

// socketOf is c's socket, for the flusher's non-blocking writes
// (trySend), or nil if it has none.
func socketOf(c *net.TCPConn) syscall.RawConn {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// writeOnce is trySend's one write(2) on a non-blocking socket: a full
// socket writes nothing and is no error.
func (st *connStream) writeOnce(fd uintptr) bool {
	for {
		n, err := syscall.Write(int(fd), st.try)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			st.tryN, st.tryErr = 0, nil
		case err != nil:
			st.tryN, st.tryErr = 0, err
		default:
			st.tryN, st.tryErr = n, nil
		}
		return true
	}
}
