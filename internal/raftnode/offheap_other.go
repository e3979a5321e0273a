//go:build !unix

package raftnode

// offHeap, without memory mappings, gives buffers from the Go heap.
type offHeap struct{}

func (offHeap) Alloc(n int) []byte { return make([]byte, 0, n) }
func (offHeap) Free([]byte)        {}
func (offHeap) mapped([]byte) bool { return false }

// mappedMin: without mappings, no buffer is mapped whatever its size.
var mappedMin = 0
