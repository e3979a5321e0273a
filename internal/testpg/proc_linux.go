package testpg

import (
	"os/exec"
	"syscall"
)

// canSwitchUser: a root process can start PostgreSQL as user postgres.
const canSwitchUser = true

// setCredential makes cmd run as cred's user (nil: this process's), and,
// for the long-running server, makes the kernel stop it with SIGQUIT (an
// immediate shutdown) should this process die without calling Stop.
func setCredential(cmd *exec.Cmd, cred *credential, server bool) {
	attr := &syscall.SysProcAttr{}
	if cred != nil {
		attr.Credential = &syscall.Credential{Uid: uint32(cred.uid), Gid: uint32(cred.gid)}
	}
	if server {
		attr.Pdeathsig = syscall.SIGQUIT
	}
	cmd.SysProcAttr = attr
}
