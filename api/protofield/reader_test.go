package protofield

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

// field is one field as a Reader gives it.
type field struct {
	num   protowire.Number
	typ   protowire.Type
	value uint64
	data  []byte
}

// readAll reads b with a Reader allowing repeats of the numbers in
// repeat, and returns its fields and Done.
func readAll(b []byte, repeat ...protowire.Number) ([]field, bool) {
	r := NewReader(b)
	for _, num := range repeat {
		r.AllowRepeat(num)
	}
	var out []field
	for r.Next() {
		f := field{num: r.Number()}
		switch {
		case r.IsVarint(f.num):
			f.typ, f.value = protowire.VarintType, r.Varint()
		case r.IsBytes(f.num):
			f.typ, f.data = protowire.BytesType, r.Bytes()
		default:
			panic("a field neither varint nor bytes")
		}
		out = append(out, f)
	}
	return out, r.Done()
}

// protowireFields walks b with protowire.ConsumeField, the reference: it
// returns b's fields, or ok false where the Reader must refuse it (what
// protowire cannot parse, a wire type other than varint and bytes, a
// number above 63, a number given twice unless repeat names it).
func protowireFields(b []byte, repeat ...protowire.Number) (fields []field, ok bool) {
	seen := make(map[protowire.Number]bool)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeField(b)
		if n < 0 || num > 63 || seen[num] && !slices.Contains(repeat, num) {
			return nil, false
		}
		seen[num] = true
		_, _, tagLen := protowire.ConsumeTag(b)
		value := b[tagLen:n]
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, _ := protowire.ConsumeVarint(value)
			fields = append(fields, field{num: num, typ: typ, value: v})
		case protowire.BytesType:
			d, _ := protowire.ConsumeBytes(value)
			fields = append(fields, field{num: num, typ: typ, data: d})
		default:
			return nil, false
		}
	}
	return fields, true
}

func sameFields(a, b []field) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].num != b[i].num || a[i].typ != b[i].typ || a[i].value != b[i].value || !bytes.Equal(a[i].data, b[i].data) {
			return false
		}
	}
	return true
}

// checkReader holds the Reader to protowire on b, with and without
// allowing field 3 to repeat.
func checkReader(t *testing.T, b []byte) {
	t.Helper()
	for _, repeat := range [][]protowire.Number{nil, {3}} {
		got, done := readAll(b, repeat...)
		want, ok := protowireFields(b, repeat...)
		if done != ok {
			t.Fatalf("%x (repeating %v): Reader done %v; protowire's walk says %v", b, repeat, done, ok)
		}
		if done && !sameFields(got, want) {
			t.Fatalf("%x (repeating %v): Reader read %v; protowire: %v", b, repeat, got, want)
		}
	}
}

// TestReaderReadsWhatAppendWrote: a message of random varint and bytes
// fields, each number once, written with the appenders, reads back field
// by field; and malformed, unusual and repeated fields stop it.
func TestReaderReadsWhatAppendWrote(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var (
			b    []byte
			want []field
		)
		for _, num := range rng.Perm(63)[:rng.IntN(10)] {
			num := protowire.Number(num + 1)
			if rng.IntN(2) == 0 {
				v := rng.Uint64() >> rng.IntN(64)
				b = AppendPresentUint(b, num, v)
				want = append(want, field{num: num, typ: protowire.VarintType, value: v})
			} else {
				d := make([]byte, rng.IntN(200))
				for i := range d {
					d[i] = byte(rng.Uint32())
				}
				b = AppendPresentBytes(b, num, d)
				want = append(want, field{num: num, typ: protowire.BytesType, data: d})
			}
		}
		got, done := readAll(b)
		if !done || !sameFields(got, want) {
			t.Fatalf("%x: read %v (done %v); wrote %v", b, got, done, want)
		}
		checkReader(t, b)
	}

	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"truncated tag", []byte{0x80}},
		{"truncated varint", []byte{0x08, 0x80}},
		{"truncated bytes", []byte{0x12, 0x05, 'a'}},
		{"field 0", []byte{0x00, 0x01}},
		{"field 64", protowire.AppendVarint(protowire.AppendTag(nil, 64, protowire.VarintType), 1)},
		{"fixed32", protowire.AppendFixed32(protowire.AppendTag(nil, 1, protowire.Fixed32Type), 1)},
		{"fixed64", protowire.AppendFixed64(protowire.AppendTag(nil, 1, protowire.Fixed64Type), 1)},
		{"group", protowire.AppendTag(protowire.AppendTag(nil, 1, protowire.StartGroupType), 1, protowire.EndGroupType)},
		{"field twice", AppendPresentUint(AppendPresentUint(nil, 1, 5), 1, 6)},
		{"varint then bytes", AppendPresentBytes(AppendPresentUint(nil, 3, 5), 3, nil)},
	} {
		if _, done := readAll(c.b); done {
			t.Errorf("%s (%x): read to the end", c.name, c.b)
		}
		checkReader(t, c.b)
	}
	repeated := AppendPresentBytes(AppendPresentUint(AppendPresentBytes(nil, 3, []byte("a")), 1, 9), 3, []byte("b"))
	if got, done := readAll(repeated, 3); !done || len(got) != 3 {
		t.Errorf("field 3 allowed to repeat: read %v, done %v", got, done)
	}
	checkReader(t, repeated)
}

// TestReaderText: Text takes a string field exactly when proto.Unmarshal
// does, and gives its value.
func TestReaderText(t *testing.T) {
	md := schemas["proto3"]["string"]
	for _, s := range []string{"", "lock/1", "héllo, 世界", "\xff", "a\xc3", "\xed\xa0\x80"} {
		b := AppendPresentBytes(nil, 1, []byte(s))
		m := dynamicpb.NewMessage(md)
		err := proto.Unmarshal(b, m)
		r := NewReader(b)
		if !r.Next() || !r.IsBytes(1) {
			t.Fatalf("%q: not read as field 1", s)
		}
		text, ok := r.Text()
		if ok != (err == nil) {
			t.Fatalf("%q: Text ok %v; proto.Unmarshal: %v", s, ok, err)
		}
		if want := m.Get(md.Fields().ByNumber(1)).String(); ok && text != want {
			t.Fatalf("Text %q; proto: %q", text, want)
		}
	}
}

// FuzzReader holds the Reader to protowire's own walk on any input.
//
//	go test -run '^$' -fuzz FuzzReader -fuzztime 60s ./api/protofield
func FuzzReader(f *testing.F) {
	f.Add([]byte{})
	f.Add(AppendString(AppendPresentUint(nil, 1, 300), 2, "name"))
	f.Add(AppendPresentBytes(AppendPresentBytes(nil, 3, []byte("a")), 3, nil))
	f.Add(protowire.AppendFixed32(protowire.AppendTag(nil, 5, protowire.Fixed32Type), 7))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkReader(t, b)
	})
}
