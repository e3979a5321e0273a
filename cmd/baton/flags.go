package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/batonlock/baton/embed"
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

// removedFlag registers a flag that an earlier release had and this one
// does not: given on the command line or as its BATON_* variable, it fails
// the parse with why it went and what to use instead, rather than being
// refused as unknown or, from the environment, silently ignored.
func removedFlag(fs *flag.FlagSet, name, instead string) {
	fs.Func(name, "removed: "+instead, func(string) error {
		return fmt.Errorf("--%s was removed: %s", name, instead)
	})
}

// byteSize is a flag of a number of bytes: an integer with an optional
// unit (B, KB, MB, GB, TB in powers of 1000; KiB, MiB, GiB, TiB in powers
// of 1024; any case), or "auto" (embed.MinFreeDiskAuto, -1).
type byteSize int64

type sizeUnit struct {
	name string
	n    int64
}

// sizeUnits are byteSize's units, the binary ones first (String).
var sizeUnits = []sizeUnit{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1},
}

func (b *byteSize) String() string {
	switch v := int64(*b); {
	case v == embed.MinFreeDiskAuto:
		return "auto"
	case v > 0:
		for _, u := range sizeUnits[:4] {
			if v%u.n == 0 {
				return fmt.Sprintf("%d%s", v/u.n, u.name)
			}
		}
	}
	return strconv.FormatInt(int64(*b), 10)
}

func (b *byteSize) Set(s string) error {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "auto") {
		*b = embed.MinFreeDiskAuto
		return nil
	}
	digits := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	unit := strings.TrimSpace(s[len(digits):])
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 {
		return errors.New("want a number of bytes (268435456, 256MiB, 1GB), 0 or auto")
	}
	mult := int64(1)
	if unit != "" {
		i := slices.IndexFunc(sizeUnits, func(u sizeUnit) bool { return strings.EqualFold(u.name, unit) })
		if i < 0 {
			return fmt.Errorf("unknown unit %q: want B, KB, MB, GB, TB, KiB, MiB, GiB or TiB", unit)
		}
		mult = sizeUnits[i].n
	}
	if n > math.MaxInt64/mult {
		return errors.New("too large")
	}
	*b = byteSize(n * mult)
	return nil
}
