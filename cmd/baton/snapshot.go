package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/embed"
)

// saveTimeout is `baton snapshot save`'s --timeout unless one is given:
// a backup of a million locks is about 90 MB, which the default of a
// client command (10 s) may not see through on a busy member.
const saveTimeout = 10 * time.Minute

// runSnapshot is `baton snapshot save|status|restore`.
func runSnapshot(g globals, args []string) int {
	const synopsis = `snapshot save FILE | snapshot status FILE | snapshot restore FILE --data-dir DIR --name NAME --initial-cluster NAME=PEER_ADDR,...`
	const example = `baton snapshot save backup.snap   (then, for each member of the new cluster: baton snapshot restore backup.snap --data-dir ... --name ... --initial-cluster ...)`
	if len(args) == 0 {
		return exitCode("snapshot", usagef("missing subcommand: want save, status or restore"))
	}
	if args[0] == "-h" || args[0] == "--help" {
		fs := newFlagSet("snapshot", synopsis, example, &g)
		fs.Usage()
		return 0
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "save":
		if g.timeout == defaultGlobals().timeout {
			g.timeout = saveTimeout
		}
		return clientCommand("snapshot save", "snapshot save FILE [flags]", "baton snapshot save backup.snap", 1, 1, g, rest, nil,
			func(ctx context.Context, c *baton.Client, pos []string, g globals) error {
				info, err := saveSnapshot(ctx, c, pos[0])
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(info)
				}
				fmt.Printf("saved %s\n", pos[0])
				return printSnapshot(info)
			})
	case "status":
		return snapshotStatus(g, rest)
	case "restore":
		return snapshotRestore(rest)
	}
	return exitCode("snapshot", usagef("unknown subcommand %q: want save, status or restore", sub))
}

// saveSnapshot writes a backup of the cluster to path atomically: into a
// temporary file beside it (mode 0600: a backup holds the signing keys'
// seeds and the hashes of the users' tokens), synced, then renamed over
// path, and the directory synced. A backup that fails leaves path as it
// was.
func saveSnapshot(ctx context.Context, c *baton.Client, path string) (baton.SnapshotInfo, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return baton.SnapshotInfo{}, fmt.Errorf("create a temporary file beside %s: %w", path, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 1<<20)
	info, err := c.SaveSnapshot(ctx, w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		err = tmp.Close()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return baton.SnapshotInfo{}, err
	}
	done = true
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return baton.SnapshotInfo{}, fmt.Errorf("sync %s: %w", filepath.Dir(path), err)
		}
	}
	return info, nil
}

// snapshotStatus is `baton snapshot status FILE`: it checks the file
// whole and describes it.
func snapshotStatus(g globals, args []string) int {
	const name = "snapshot status"
	fs := newFlagSet(name, "snapshot status FILE [flags]", "baton snapshot status backup.snap", &g)
	pos, _, code, ok := parseCommand(name, fs, args)
	if !ok {
		return code
	}
	if err := argCount(pos, 1, 1, []string{"FILE"}); err != nil {
		return exitCode(name, err)
	}
	info, err := verifySnapshotFile(pos[0])
	if err != nil {
		return exitCode(name, err)
	}
	if g.json {
		return exitCode(name, printJSON(info))
	}
	return exitCode(name, printSnapshot(info))
}

func verifySnapshotFile(path string) (baton.SnapshotInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return baton.SnapshotInfo{}, err
	}
	defer f.Close()
	info, err := baton.VerifySnapshot(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return baton.SnapshotInfo{}, fmt.Errorf("%s: %w", path, err)
	}
	return info, nil
}

// printSnapshot describes a backup as `baton snapshot status` does.
func printSnapshot(info baton.SnapshotInfo) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "cluster id\t%x\n", info.ClusterID)
	fmt.Fprintf(w, "index\t%d\n", info.Index)
	fmt.Fprintf(w, "term\t%d\n", info.Term)
	fmt.Fprintf(w, "log version\t%d\n", info.LogVersion)
	fmt.Fprintf(w, "size\t%d bytes, checksums verified (SHA-256)\n", info.Size)
	taken := "member " + info.TakenBy
	if !info.TakenAt.IsZero() {
		taken += " at " + info.TakenAt.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "taken by\t%s\n", taken)
	for _, m := range info.Members {
		kind := "voter"
		if m.Learner {
			kind = "learner"
		}
		fmt.Fprintf(w, "member\t%s %s (%s)\n", m.Name, m.PeerAddr, kind)
	}
	return w.Flush()
}

// snapshotRestore is `baton snapshot restore FILE --data-dir DIR --name
// NAME --initial-cluster ...`: it seeds one member of a new cluster
// (embed.Restore). The flags are `baton server`'s of the same names, and
// like them also BATON_<FLAG> variables.
func snapshotRestore(args []string) int {
	const name = "snapshot restore"
	const synopsis = "snapshot restore FILE --data-dir DIR --name NAME [--initial-cluster NAME=PEER_ADDR,...] [--peer-addr ADDR]"
	const example = "baton snapshot restore backup.snap --data-dir /var/lib/baton/r1 --name r1 --initial-cluster r1=10.0.1.1:7701,r2=10.0.1.2:7701,r3=10.0.1.3:7701"
	d := embed.DefaultConfig()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "the new member's data directory: empty or absent (required)")
	memberName := fs.String("name", "", "the new member's name, one of --initial-cluster's (required)")
	cluster := fs.String("initial-cluster", "", "every member of the new cluster as name=peer-addr,..., the same for each member restored (empty: a single node at --peer-addr)")
	peerAddr := fs.String("peer-addr", d.PeerAddr, "with no --initial-cluster, the single node's peer address")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: baton %s\n\nSeeds one member of a new cluster from a backup; run it once for every\nmember, with the same FILE and --initial-cluster, then start each with\n`baton server` and the same --name, --data-dir and --initial-cluster.\n\nExample:\n  %s\n\nFlags:\n", synopsis, example)
		fs.PrintDefaults()
	}
	pos, _, code, ok := parseCommand(name, fs, args)
	if !ok {
		return code
	}
	if err := applyEnv(fs); err != nil {
		return exitCode(name, usagef("%s", err))
	}
	switch err := argCount(pos, 1, 1, []string{"FILE"}); {
	case err != nil:
		return exitCode(name, err)
	case *dataDir == "":
		return exitCode(name, usagef("missing --data-dir: the new member's data directory"))
	case *memberName == "":
		return exitCode(name, usagef("missing --name: the new member's name"))
	}
	cfg := d
	cfg.Name, cfg.DataDir, cfg.InitialCluster, cfg.PeerAddr = *memberName, *dataDir, *cluster, *peerAddr
	if *cluster != "" {
		peers, err := embed.ParseCluster(*cluster)
		if err != nil {
			return exitCode(name, usagef("%s", err))
		}
		for _, p := range peers {
			if p.Name == *memberName {
				cfg.PeerAddr = p.PeerAddr
			}
		}
	}
	f, err := os.Open(pos[0])
	if err != nil {
		return exitCode(name, err)
	}
	defer f.Close()
	r, err := embed.Restore(cfg, bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "embed: ")
		if !errors.Is(err, embed.ErrDataDirNotEmpty) {
			msg = pos[0] + ": " + msg
		}
		return exitCode(name, errors.New(msg))
	}
	start := fmt.Sprintf("baton server --name %s --data-dir %s --peer-addr %s", cfg.Name, cfg.DataDir, cfg.PeerAddr)
	if *cluster != "" {
		start += " --initial-cluster " + *cluster
	}
	fmt.Printf("restored %s into %s: a member of a new cluster %x (the backup is of cluster %x at index %d).\n"+
		"Restore every member of --initial-cluster alike, then start each:\n  %s [--client-addr ...]\n",
		cfg.Name, cfg.DataDir, r.ClusterID, r.FromClusterID, r.Index, start)
	return 0
}
