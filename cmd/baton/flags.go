package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// envName is the environment variable of a flag: --peer-addr is
// BATON_PEER_ADDR.
func envName(flagName string) string {
	return "BATON_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv sets every flag not given on the command line from its
// BATON_* variable, so precedence is flag > environment > default.
func applyEnv(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, e)
			}
		}
	})
	return err
}
