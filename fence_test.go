package baton_test

import (
	"github.com/batonlock/baton"
	"github.com/batonlock/baton/fence"
)

// A Lease is what the fence package's client helpers take, though fence
// does not import baton.
var _ fence.Holder = (*baton.Lease)(nil)

// And, with its signed token, what SetHeaders sends with the
// SignedTokenHeader.
var _ fence.SignedHolder = (*baton.Lease)(nil)
