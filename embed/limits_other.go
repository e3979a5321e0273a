//go:build !unix

package embed

// openFileLimit is unknown here: DefaultConfig uses MaxClientConnsCeiling.
func openFileLimit() (uint64, bool) { return 0, false }
