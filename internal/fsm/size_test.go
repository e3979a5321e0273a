package fsm

import (
	"testing"
	"unsafe"
)

// TestRecordSizes pins the sizes of the records a million locks are made
// of (docs/BENCHMARKS.md, memory): a lock is a 48-byte allocation and a
// lone holder a 64-byte one. A field added to either moves it to the next
// size class for every lock; put it where there is room (the holder limit
// lives in holder and waiter records for this reason).
func TestRecordSizes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes pinned for 64-bit platforms")
	}
	for _, c := range []struct {
		what      string
		got, want uintptr
	}{
		{"lock", unsafe.Sizeof(lock{}), 48},
		{"holder", unsafe.Sizeof(holder{}), 64},
		{"waiter", unsafe.Sizeof(waiter{}), 56},
	} {
		if c.got != c.want {
			t.Errorf("%s record is %d bytes, want %d", c.what, c.got, c.want)
		}
	}
}
