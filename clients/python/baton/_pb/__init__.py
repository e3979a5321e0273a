"""Generated protobuf messages of baton.v1 (scripts/genproto.sh writes them)."""

from baton._pb.api.batonpb import baton_pb2 as pb

__all__ = ["pb"]
