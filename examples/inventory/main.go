// Command inventory shows, on a real PostgreSQL and a real Baton, why a
// lock needs fencing. Workers sell a stock of items, each sale reading
// the stock and writing one less with a record of the sale, in three
// modes:
//
//   - none: no lock. Workers read the same stock and sell the same unit
//     twice: more sales than items.
//   - lock: each sale under a Baton mutex, written as before. Worker 0
//     pauses between its check and its write for longer than its
//     session's TTL; its lock passes to another worker, and its late
//     write sells a unit again and puts back stock that was sold.
//   - fenced: the same pause, but the stock is written with the lock's
//     fencing token (package fence's one-statement conditional UPDATE,
//     through fencepgx): the database refuses worker 0's late write, and
//     exactly the stock is sold.
//
// Usage:
//
//	go run ./examples/inventory [--workers 4] [--stock 20] [--json] [--dsn DSN] [--modes none,lock,fenced]
//
// It prints a table, or with --json one JSON object per mode. Baton is
// one member embedded in the process, in a temporary directory, on a free
// port of 127.0.0.1. PostgreSQL is --dsn (or BATON_INVENTORY_DSN), where
// it makes the tables baton_inventory and baton_sales anew; without one
// it starts its own from Debian's postgresql (internal/testpg: initdb in a
// temporary directory, a unix socket there, run as user postgres when
// this program runs as root, since PostgreSQL refuses root) and stops it
// at the end.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/internal/testpg"
)

func main() {
	if err := inventory(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "inventory:", err)
		os.Exit(1)
	}
}

func inventory(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("inventory", flag.ContinueOnError)
	workers := fs.Int("workers", 4, "workers selling at once (at least 2)")
	stock := fs.Int("stock", 20, "items in stock at the start")
	asJSON := fs.Bool("json", false, "print one JSON object per mode instead of a table")
	dsn := fs.String("dsn", os.Getenv("BATON_INVENTORY_DSN"), "PostgreSQL to use (env BATON_INVENTORY_DSN); empty: start one")
	modes := fs.String("modes", strings.Join(allModes, ","), "the modes to run, in order")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *workers < 2 || *stock < 1 {
		return fmt.Errorf("--workers %d --stock %d: want at least 2 workers and 1 item", *workers, *stock)
	}
	var chosen []string
	for m := range strings.SplitSeq(*modes, ",") {
		if !slices.Contains(allModes, m) {
			return fmt.Errorf("--modes: unknown mode %q (want some of %s)", m, strings.Join(allModes, ","))
		}
		chosen = append(chosen, m)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	if *dsn == "" {
		pg, err := testpg.Start(ctx)
		if err != nil {
			return err
		}
		defer pg.Stop()
		*dsn = pg.DSN()
	}
	member, stopBaton, err := startBaton()
	if err != nil {
		return err
	}
	defer stopBaton()

	cfg := defaultConfig(*workers, *stock, *dsn, member.ClientAddr())
	var results []result
	for _, mode := range chosen {
		res, err := runMode(ctx, cfg, mode)
		if err != nil {
			return err
		}
		results = append(results, res)
	}
	if *asJSON {
		return printJSON(out, results)
	}
	return printTable(out, results)
}

// defaultConfig is the scenario's configuration: worker 0's session has
// a short TTL, so that its pause outlasts it in a few seconds, yet long
// enough (a keepalive every TTL/3) that a busy machine does not end it
// before the pause; the others' a long one.
func defaultConfig(workers, stock int, dsn, batonAddr string) config {
	return config{
		workers: workers, stock: stock, dsn: dsn, baton: batonAddr,
		pausedTTL: 2 * time.Second, otherTTL: 30 * time.Second,
		pauseLimit: 30 * time.Second,
	}
}

// startBaton starts one Baton member in a temporary directory on a free
// port of 127.0.0.1.
func startBaton() (*embed.Member, func(), error) {
	dir, err := os.MkdirTemp("", "baton-inventory-")
	if err != nil {
		return nil, nil, err
	}
	cfg := embed.DefaultConfig()
	cfg.DataDir = dir
	cfg.ClientAddr = "127.0.0.1:0"
	cfg.PeerAddr = "127.0.0.1:0"
	cfg.TickInterval = 10 * time.Millisecond // a quick first election
	m, err := embed.Start(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return m, func() {
		m.Close()
		os.RemoveAll(dir)
	}, nil
}

func printJSON(out io.Writer, results []result) error {
	enc := json.NewEncoder(out)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

func printTable(out io.Writer, results []result) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tstock\tsold\toversold\tdouble-sold\trefused writes\tfinal stock\tpaused worker's write\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", r.Mode, r.Stock, r.Sold, r.Oversold, r.DoubleSold, r.RefusedWrites, r.FinalStock, r.PausedWrite)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprint(out, `
oversold: sales beyond the stock; double-sold: sales of a unit already sold.
Worker 0 pauses between its check and its write until another worker has
sold; under a lock, past its session's TTL. Without fencing its late write
applies; with fencing the database refuses it.
`)
	return err
}
