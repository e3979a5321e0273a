package transport

import (
	"golang.org/x/sys/unix"
	"log/slog"
	"net"
)

// setUserTimeout sets TCP_USER_TIMEOUT on c: sent data unacknowledged for
// userTimeout ends the connection.
func setUserTimeout(c net.Conn, log *slog.Logger) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(userTimeout.Milliseconds()))
	}); err == nil && serr != nil {
		log.Debug("cannot set TCP_USER_TIMEOUT", "err", serr)
	}
}
