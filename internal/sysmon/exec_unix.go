//go:build unix

package sysmon

import "syscall"

func replace(path string, args, env []string) error { return syscall.Exec(path, args, env) }
