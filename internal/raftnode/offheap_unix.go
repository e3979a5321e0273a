//go:build unix

package raftnode

import (
	"syscall"
)

// mappedMin is the smallest snapshot buffer taken outside the Go heap: a
// smaller one does not move the collector's goal enough to matter, and a
// mapping costs a system call or two. A variable for tests.
var mappedMin = 4 << 20

// offHeap gives large snapshot buffers from anonymous memory mappings
// (fsm.Buffers), returned to the OS by Free, and small ones from the Go
// heap.
type offHeap struct{}

func (offHeap) Alloc(n int) []byte {
	if n < mappedMin {
		return make([]byte, 0, n)
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		// The heap, then. Free's Munmap refuses it harmlessly; the node
		// takes it for a mapping and skips the collection after it.
		return make([]byte, 0, n)
	}
	return b[:0]
}

// mapped reports whether b, from Alloc, is (normally) a mapping.
func (offHeap) mapped(b []byte) bool { return cap(b) >= mappedMin }

func (offHeap) Free(b []byte) {
	if cap(b) < mappedMin {
		return
	}
	// A buffer of that size that did not come from a mapping (Alloc's
	// fallback) makes Munmap fail; the collector frees it.
	_ = syscall.Munmap(b[:cap(b)])
}
