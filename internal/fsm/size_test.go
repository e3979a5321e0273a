package fsm

import (
	"testing"
	"unsafe"
)

// TestRecordSizes pins the sizes of the records a million locks are made
// of (docs/BENCHMARKS.md, memory): a lock's state with its first holder
// inside is a 112-byte allocation (a size class of Go's allocator), a
// holder 64 bytes, and the lock's handle (frozen.go) 16. A field added to
// a state or a holder moves every lock to the next size class (128); put
// it where there is room (the holder limit lives in holder and waiter
// records for this reason).
func TestRecordSizes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes pinned for 64-bit platforms")
	}
	for _, c := range []struct {
		what      string
		got, want uintptr
	}{
		{"lock state", unsafe.Sizeof(lockState{}), 112},
		{"lock handle", unsafe.Sizeof(lock{}), 16},
		{"holder", unsafe.Sizeof(holder{}), 64},
		{"waiter", unsafe.Sizeof(waiter{}), 56},
	} {
		if c.got != c.want {
			t.Errorf("%s record is %d bytes, want %d", c.what, c.got, c.want)
		}
	}
}
