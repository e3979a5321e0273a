//go:build race

package sim

// Under the race detector every scenario runs about ten times slower; CI
// still gets a few hundred scenarios with faults in about a minute.
const raceEnabled = true
