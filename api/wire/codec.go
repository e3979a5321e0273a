package wire

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	"github.com/batonlock/baton/api/batonpb"
)

// Codec is gRPC's proto codec, except that it encodes and decodes
// SessionsRequest and SessionsResponse with this package. The server installs it with
// grpc.ForceServerCodecV2, the client for its Sessions streams with
// grpc.ForceCodecV2; the bytes on the wire are the same either way.
type Codec struct{}

var protoCodec = encoding.GetCodecV2(grpcproto.Name)

func init() {
	if protoCodec == nil {
		panic("wire: gRPC's proto codec is not registered")
	}
}

// Name is empty so that a call using Codec keeps the plain content type
// "application/grpc" (a codec's name becomes a suffix, "+name"), which
// every member's listener routes to gRPC.
func (Codec) Name() string { return "" }

// Marshal encodes v as the proto codec does, the stream's batches with
// this package.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *batonpb.SessionsRequest:
		if size, ok := sizeSessionsRequest(m); ok {
			return encoded(size, func(b []byte) []byte { return appendSessionsRequest(b, m) }), nil
		}
	case *batonpb.SessionsResponse:
		if size, ok := sizeSessionsResponse(m); ok {
			return encoded(size, func(b []byte) []byte { return appendSessionsResponse(b, m) }), nil
		}
	}
	return protoCodec.Marshal(v)
}

// encoded is a message of size bytes written by appendTo, in a pooled
// buffer unless it is small (as the proto codec does).
func encoded(size int, appendTo func([]byte) []byte) mem.BufferSlice {
	if mem.IsBelowBufferPoolingThreshold(size) {
		return mem.BufferSlice{mem.SliceBuffer(appendTo(make([]byte, 0, size)))}
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	*buf = appendTo((*buf)[:0])
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}
}

// Unmarshal decodes data into v.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *batonpb.SessionsRequest:
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		if err := UnmarshalSessionsRequest(buf.ReadOnlyData(), m); err != nil {
			return fmt.Errorf("decoding %T: %w", v, err)
		}
		return nil
	case *batonpb.SessionsResponse:
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		if err := UnmarshalSessionsResponse(buf.ReadOnlyData(), m); err != nil {
			return fmt.Errorf("decoding %T: %w", v, err)
		}
		return nil
	}
	return protoCodec.Unmarshal(data, v)
}
