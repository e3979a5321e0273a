package protofield

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// numbers are the field numbers the tests encode: one-byte tags and the
// edges of two-, three- and four-byte ones, up to the largest number.
var numbers = []protowire.Number{1, 2, 15, 16, 17, 2047, 2048, 262143, 262144, protowire.MaxValidNumber}

// schemas are the messages the tests marshal with proto, by syntax and
// kind: each has a field of its kind at every one of numbers. "inner" is
// the message that "message" fields hold: bytes data = 1.
var schemas = map[string]map[string]protoreflect.MessageDescriptor{
	"proto3": buildSchema("proto3", "uint64", "int64", "bool", "string", "bytes", "message"),
	"proto2": buildSchema("proto2", "uint64", "bytes"), // optional fields: presence
}

func buildSchema(syntax string, kinds ...string) map[string]protoreflect.MessageDescriptor {
	types := map[string]descriptorpb.FieldDescriptorProto_Type{
		"uint64": descriptorpb.FieldDescriptorProto_TYPE_UINT64, "int64": descriptorpb.FieldDescriptorProto_TYPE_INT64,
		"bool": descriptorpb.FieldDescriptorProto_TYPE_BOOL, "string": descriptorpb.FieldDescriptorProto_TYPE_STRING,
		"bytes": descriptorpb.FieldDescriptorProto_TYPE_BYTES, "message": descriptorpb.FieldDescriptorProto_TYPE_MESSAGE,
	}
	optional := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
	file := &descriptorpb.FileDescriptorProto{
		Name: proto.String("protofield_" + syntax + ".proto"), Package: proto.String("protofield." + syntax), Syntax: proto.String(syntax),
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("inner"), Field: []*descriptorpb.FieldDescriptorProto{
			{Name: proto.String("data"), Number: proto.Int32(1), Label: &optional, Type: types["bytes"].Enum()}}}},
	}
	for _, k := range kinds {
		msg := &descriptorpb.DescriptorProto{Name: proto.String(k)}
		for _, num := range numbers {
			f := &descriptorpb.FieldDescriptorProto{Name: proto.String(fmt.Sprintf("f%d", num)), Number: proto.Int32(int32(num)), Label: &optional, Type: types[k].Enum()}
			if k == "message" {
				f.TypeName = proto.String(".protofield." + syntax + ".inner")
			}
			msg.Field = append(msg.Field, f)
		}
		file.MessageType = append(file.MessageType, msg)
	}
	fd, err := protodesc.NewFile(file, nil)
	if err != nil {
		panic(err)
	}
	out := make(map[string]protoreflect.MessageDescriptor)
	for i := range fd.Messages().Len() {
		out[string(fd.Messages().Get(i).Name())] = fd.Messages().Get(i)
	}
	return out
}

// marshalField is proto.Marshal of the message of syntax and kind with
// field num set to v (for proto3, a zero v leaves it unset).
func marshalField(t testing.TB, syntax, kind string, num protowire.Number, v protoreflect.Value) []byte {
	t.Helper()
	md := schemas[syntax][kind]
	m := dynamicpb.NewMessage(md)
	m.Set(md.Fields().ByNumber(num), v)
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatalf("proto.Marshal of %s %s field %d: %v", syntax, kind, num, err)
	}
	return b
}

// checkField fails unless appendTo appends want after a prefix, which it
// leaves alone, and size is its length.
func checkField(t testing.TB, what string, want []byte, appendTo func([]byte) []byte, size int) {
	t.Helper()
	prefix := []byte("prefix")
	got := appendTo(bytes.Clone(prefix))
	if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("%s: appended %x; proto.Marshal: %x", what, got[min(len(prefix), len(got)):], want)
	}
	if size != len(want) {
		t.Fatalf("%s: size %d; proto.Marshal wrote %d bytes", what, size, len(want))
	}
}

// checkAllKinds holds every appender and size to proto.Marshal for field
// num and the values v and s (s as a string only when it is UTF-8, which
// proto requires of a string).
func checkAllKinds(t testing.TB, num protowire.Number, v uint64, s string) {
	t.Helper()
	at := func(what string) string { return fmt.Sprintf("%s field %d (%d, %q)", what, num, v, s) }
	data := []byte(s)

	checkField(t, at("AppendUint uint64"), marshalField(t, "proto3", "uint64", num, protoreflect.ValueOfUint64(v)),
		func(b []byte) []byte { return AppendUint(b, num, v) }, SizeUint(num, v))
	checkField(t, at("AppendUint int64"), marshalField(t, "proto3", "int64", num, protoreflect.ValueOfInt64(int64(v))),
		func(b []byte) []byte { return AppendUint(b, num, uint64(int64(v))) }, SizeUint(num, uint64(int64(v))))
	bv := v&1 == 1
	checkField(t, at("AppendBool"), marshalField(t, "proto3", "bool", num, protoreflect.ValueOfBool(bv)),
		func(b []byte) []byte { return AppendBool(b, num, bv) }, SizeBool(num, bv))
	if utf8.ValidString(s) {
		checkField(t, at("AppendString"), marshalField(t, "proto3", "string", num, protoreflect.ValueOfString(s)),
			func(b []byte) []byte { return AppendString(b, num, s) }, SizeString(num, s))
	}
	checkField(t, at("AppendBytes"), marshalField(t, "proto3", "bytes", num, protoreflect.ValueOfBytes(data)),
		func(b []byte) []byte { return AppendBytes(b, num, data) }, SizeBytes(num, data))

	checkField(t, at("AppendPresentUint"), marshalField(t, "proto2", "uint64", num, protoreflect.ValueOfUint64(v)),
		func(b []byte) []byte { return AppendPresentUint(b, num, v) }, SizePresentUint(num, v))
	checkField(t, at("AppendPresentBytes"), marshalField(t, "proto2", "bytes", num, protoreflect.ValueOfBytes(data)),
		func(b []byte) []byte { return AppendPresentBytes(b, num, data) }, SizePresentBytes(num, len(data)))

	// A message field holding inner{data}, set even when it is empty.
	inner := dynamicpb.NewMessage(schemas["proto3"]["inner"])
	inner.Set(inner.Descriptor().Fields().ByNumber(1), protoreflect.ValueOfBytes(data))
	innerSize := SizeBytes(1, data)
	checkField(t, at("AppendMessageHeader"), marshalField(t, "proto3", "message", num, protoreflect.ValueOfMessage(inner)),
		func(b []byte) []byte { return AppendBytes(AppendMessageHeader(b, num, innerSize), 1, data) }, SizeMessage(num, innerSize))
}

// TestAppendAsProto: every appender writes a field as proto.Marshal does,
// byte for byte, and every size is its length: zero and empty values
// (left out without presence, written with it), one-byte values and
// lengths and the edges of longer ones, negative int64s, non-ASCII
// strings, at every size of tag.
func TestAppendAsProto(t *testing.T) {
	uints := []uint64{0, 1, 0x7f, 0x80, 0x3fff, 0x4000, 1 << 35, 1 << 63, math.MaxUint64, uint64(1<<64 - 300)}
	strs := []string{"", "a", strings.Repeat("x", 0x7f), strings.Repeat("x", 0x80), strings.Repeat("y", 20000), "héllo, 世界", "\xff"}
	for _, num := range numbers {
		for i, v := range uints {
			checkAllKinds(t, num, v, strs[i%len(strs)])
		}
		for i, s := range strs {
			checkAllKinds(t, num, uints[i%len(uints)], s)
		}
	}
}

// FuzzAppendAsProto is TestAppendAsProto for any value and string.
//
//	go test -run '^$' -fuzz FuzzAppendAsProto -fuzztime 60s ./api/protofield
func FuzzAppendAsProto(f *testing.F) {
	f.Add(uint8(0), uint64(0), "")
	f.Add(uint8(3), uint64(1<<63), "héllo")
	f.Add(uint8(9), uint64(300), strings.Repeat("x", 200))
	f.Fuzz(func(t *testing.T, i uint8, v uint64, s string) {
		checkAllKinds(t, numbers[int(i)%len(numbers)], v, s)
	})
}
