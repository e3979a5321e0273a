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
# The Python client's messages (clients/python/baton/_pb), with protoc's
# own Python generator (code, and .pyi stubs for type checkers):
# baton.proto and the google/api annotations it imports. protoc writes
# absolute imports (`from google.api import ...`), which would need
# another distribution's google.api package; they are made imports of the
# client's own copy.
py=clients/python/baton/_pb
rm -rf "$py/api" "$py/google"
protoc "${inc[@]}" --python_out="$py" --pyi_out="$py" \
  api/batonpb/baton.proto google/api/annotations.proto google/api/http.proto
sed -i 's/^from google\.api import /from baton._pb.google.api import /' \
  "$py"/api/batonpb/baton_pb2.py* "$py"/google/api/annotations_pb2.py*
for d in "$py/api" "$py/api/batonpb" "$py/google" "$py/google/api"; do
  : >"$d/__init__.py"
done
# The Java client's messages (clients/java/src/main/java: package baton.v1
# and the google.api annotations it imports), with protoc's own Java
# generator, for Debian's protobuf-java of the same version as protoc.
jv=clients/java/src/main/java
rm -rf "$jv/baton/v1" "$jv/com/google/api"
protoc "${inc[@]}" --java_out="$jv" \
  api/batonpb/baton.proto google/api/annotations.proto google/api/http.proto
