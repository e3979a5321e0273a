//go:build !linux

package testpg

import "os/exec"

// canSwitchUser: only the Linux build starts PostgreSQL as another user.
const canSwitchUser = false

// setCredential does nothing: PostgreSQL runs as this process's user.
func setCredential(cmd *exec.Cmd, cred *credential, server bool) {}
