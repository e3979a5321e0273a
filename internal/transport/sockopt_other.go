//go:build !linux

package transport

import (
	"log/slog"
	"net"
)

// setUserTimeout does nothing here: TCP_USER_TIMEOUT is Linux's. The write
// deadline and TCP keepalives still end a connection to a vanished peer.
func setUserTimeout(net.Conn, *slog.Logger) {}
