#!/usr/bin/env bash
# Regenerates every *.pb.go from its .proto. Needs protoc (Debian:
# protobuf-compiler); the Go plugins are pinned as tools in go.mod.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/" google.golang.org/protobuf/cmd/protoc-gen-go \
  google.golang.org/grpc/cmd/protoc-gen-go-grpc \
  github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway
export PATH="$bin:$PATH"
inc=(-I . -I third_party/googleapis -I /usr/include)
protoc "${inc[@]}" --go_out=. --go_opt=module=github.com/batonlock/baton \
  internal/fsm/fsmpb/fsm.proto internal/transport/transportpb/transport.proto
protoc "${inc[@]}" --go_out=. --go_opt=module=github.com/batonlock/baton \
  --go-grpc_out=. --go-grpc_opt=module=github.com/batonlock/baton \
  --grpc-gateway_out=. --grpc-gateway_opt=module=github.com/batonlock/baton \
  api/batonpb/baton.proto
