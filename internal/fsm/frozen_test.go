package fsm

import (
	"bytes"
	"unsafe"
)

// freezer takes frozen states of a stream's machine and checks that each
// encodes to the bytes Snapshot gave when it was frozen, however many
// entries were applied meanwhile, and wherever the encoder was when they
// were: encoded later on the same goroutine; encoded one record at a time
// with entries applied between records; or encoded on another goroutine
// while the stream goes on (which -race checks for unguarded changes); or
// later, into buffers from a Buffers (testBuffers), all given back.
type freezer struct {
	f     *Frozen
	want  []byte
	mode  int
	left  int // steps before the encoding is taken
	async chan []byte
	taken map[int]int
	bufs  testBuffers
}

// testBuffers hands out heap buffers of exactly the capacity asked for and
// checks that each comes back once.
type testBuffers struct {
	out           map[*byte]bool
	allocs, frees int
	outgrown      int // encodings that ended on the Go heap
}

func (b *testBuffers) Alloc(n int) []byte {
	if b.out == nil {
		b.out = make(map[*byte]bool)
	}
	buf := make([]byte, 0, max(n, 1))
	b.out[unsafe.SliceData(buf)] = true
	b.allocs++
	return buf
}

func (b *testBuffers) Free(buf []byte) {
	p := unsafe.SliceData(buf)
	if !b.out[p] {
		panic("testBuffers: a buffer freed twice, or not from Alloc")
	}
	delete(b.out, p)
	b.frees++
}

// beforeStep runs before each step of s.
func (z *freezer) beforeStep(s *stream) {
	if z.taken == nil {
		z.taken = make(map[int]int)
	}
	r := s.rng
	if z.f == nil {
		if r.IntN(25) != 0 {
			return
		}
		z.want, _ = s.m.Snapshot()
		z.f = s.m.Freeze()
		z.mode, z.left = r.IntN(4), r.IntN(40)
		if z.mode == 2 {
			z.async = make(chan []byte, 1)
			f := z.f
			go func() { z.async <- f.Encode() }()
		}
		return
	}
	if z.left > 0 {
		z.left--
		return
	}
	var got []byte
	switch z.mode {
	case 0:
		got = z.f.Encode()
	case 1:
		z.f.between = func() {
			for k := r.IntN(3); k > 0; k-- {
				s.step()
			}
		}
		got = z.f.Encode()
	case 2:
		got = <-z.async
	case 3:
		// Exact capacities and small hints: the buffer is outgrown,
		// before a record (grow) and by one (checkOwned).
		z.f.hint = 1 + r.IntN(2000)
		bufs := &z.bufs
		var free func()
		got, free = z.f.EncodeWith(bufs)
		if free == nil {
			bufs.outgrown++
		} else {
			got = bytes.Clone(got)
			free()
		}
		if len(bufs.out) != 0 {
			s.t.Fatalf("entry %d: %d buffers not given back", s.index, len(bufs.out))
		}
	}
	if !bytes.Equal(got, z.want) {
		s.t.Fatalf("entry %d: a state frozen at %d encodes to %d bytes, its snapshot was %d; first difference at %d (mode %d)",
			s.index, z.f.AppliedIndex(), len(got), len(z.want), firstDiff(got, z.want), z.mode)
	}
	s.m.Thaw(z.f)
	z.taken[z.mode]++
	z.f = nil
}
