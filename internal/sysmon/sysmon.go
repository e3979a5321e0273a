// Package sysmon keeps the Go runtime's system monitor from being woken by
// every system call that ends an idle moment, which on a Baton member is
// every command at low load.
//
// The monitor (the runtime's sysmon thread) goes to sleep for good when
// every processor of the process is idle, and the next system call any
// goroutine makes wakes it (a futex wake, which in a virtual machine is an
// interrupt between CPUs); it then polls every 20 us until the process is
// idle again. A member is idle between commands whenever the load is light,
// so every command paid a wake and a run of 20 us sleeps in each process:
// a third of a follower's context switches with one lock taken at a time
// (docs/BENCHMARKS.md). The runtime keeps its monitor out of that sleep
// only while GODEBUG's schedtrace is set, so that it can print on time;
// it then backs off to a 10 ms poll while there is nothing to retake.
//
// Setting is schedtrace's longest period, 2^31-1 ms: the runtime prints
// its one-line scheduler summary (a line starting "SCHED") to standard
// error only when the system's monotonic clock, which starts at boot,
// passes a multiple of it, so never on a machine up for less than 24.8
// days, and once every 24.8 days after that.
//
// GODEBUG is read when the process starts, so Reexec replaces the process
// with itself, once, with the setting added.
package sysmon

import (
	"os"
	"runtime"
	"strings"
)

// Setting is the GODEBUG entry this package adds.
const Setting = "schedtrace=2147483647"

// Env returns the environment to re-execute with, environ with Setting
// added to GODEBUG, and true; or nil and false when the process should go
// on as it is:
//   - GODEBUG already names schedtrace: the operator's choice wins, and
//     GODEBUG=schedtrace=0 turns this off (it is also how the re-executed
//     process knows it is done);
//   - the process has a single processor (procs, GOMAXPROCS): with the
//     monitor backed off, a goroutine queued behind one that blocks in a
//     system call could wait up to 10 ms for it to be noticed, where with
//     more processors an idle one takes the work over. This is decided
//     once, at start: a GOMAXPROCS that the runtime lowers to 1 later (a
//     container's CPU limit changed) keeps the setting.
func Env(environ []string, procs int) ([]string, bool) {
	if procs < 2 {
		return nil, false
	}
	at := -1
	for i, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			// The runtime reads the first GODEBUG in the environment.
			at = i
			for field := range strings.SplitSeq(v, ",") {
				if key, _, _ := strings.Cut(field, "="); key == "schedtrace" {
					return nil, false
				}
			}
			break
		}
	}
	env := append([]string(nil), environ...)
	switch {
	case at < 0:
		env = append(env, "GODEBUG="+Setting)
	case env[at] == "GODEBUG=":
		env[at] += Setting
	default:
		env[at] += "," + Setting
	}
	return env, true
}

// Reexec replaces the process with the same executable, arguments and
// environment plus Setting, when Env says so. It returns nil without
// doing anything when Env does not apply, and an error when the process
// could not be replaced (it then goes on as it was); it does not return
// when it succeeds. Call it early, before the process opens anything.
func Reexec() error {
	env, ok := Env(os.Environ(), runtime.GOMAXPROCS(0))
	if !ok {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return replace(exe, os.Args, env)
}
