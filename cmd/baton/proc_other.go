//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// ownGroup does nothing here: without Unix process groups the console
// delivers Ctrl-C to the command as well.
func ownGroup(*exec.Cmd) {}

// signalGroup can only kill: other systems deliver no signals between
// processes.
func signalGroup(p *os.Process, sig os.Signal) error {
	if sig == os.Interrupt {
		return nil // the console delivered it to the command too
	}
	return p.Kill()
}

// terminate is a kill here: no signal asks a process to stop.
var terminate, killAfter os.Signal = os.Kill, os.Kill
