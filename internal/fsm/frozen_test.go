package fsm

import (
	"bytes"
)

// freezer takes frozen states of a stream's machine and checks that each
// encodes to the bytes Snapshot gave when it was frozen, however many
// entries were applied meanwhile, and wherever the encoder was when they
// were: encoded later on the same goroutine; encoded one record at a time
// with entries applied between records; or encoded on another goroutine
// while the stream goes on (which -race checks for unguarded changes).
type freezer struct {
	f     *Frozen
	want  []byte
	mode  int
	left  int // steps before the encoding is taken
	async chan []byte
	taken map[int]int
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
		z.mode, z.left = r.IntN(3), r.IntN(40)
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
		z.f.batch = 1
		z.f.between = func() {
			for k := r.IntN(3); k > 0; k-- {
				s.step()
			}
		}
		got = z.f.Encode()
	case 2:
		got = <-z.async
	}
	if !bytes.Equal(got, z.want) {
		s.t.Fatalf("entry %d: a state frozen at %d encodes to %d bytes, its snapshot was %d; first difference at %d (mode %d)",
			s.index, z.f.AppliedIndex(), len(got), len(z.want), firstDiff(got, z.want), z.mode)
	}
	s.m.Thaw(z.f)
	z.taken[z.mode]++
	z.f = nil
}
