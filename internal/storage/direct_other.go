//go:build !linux

package storage

import (
	"errors"
	"os"
)

// openDirect is Linux only; elsewhere the log writes through the page
// cache.
func openDirect(string) (*os.File, error) { return nil, errors.New("direct I/O is not supported here") }

func pwriteDirect(*os.File, []byte, int64, bool) error {
	return errors.New("direct I/O is not supported here")
}

var writeDirect = pwriteDirect
