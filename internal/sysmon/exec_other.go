//go:build !unix

package sysmon

// replace does nothing here (there is no Unix exec, and a new process would
// have a new identity, which its supervisor would not expect): the process
// goes on without the setting.
func replace(string, []string, []string) error { return nil }
