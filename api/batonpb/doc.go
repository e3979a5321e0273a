// Package batonpb holds Baton's public wire contract (baton.proto, package
// baton.v1) and the Go code generated from it: messages, the gRPC service
// and the grpc-gateway HTTP/JSON handlers.
package batonpb

//go:generate bash ../../scripts/genproto.sh
