package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/internal/server"
)

// stepDownTimeout bounds a leader's hand-off of its office on SIGTERM.
const stepDownTimeout = 10 * time.Second

func runServer(args []string) int {
	d := embed.DefaultConfig()
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	name := fs.String("name", d.Name, "member name, unique in the cluster")
	dataDir := fs.String("data-dir", d.DataDir, "directory for the log and snapshots")
	clientAddr := fs.String("client-addr", d.ClientAddr, "address of the client API (gRPC and HTTP/JSON)")
	peerAddr := fs.String("peer-addr", d.PeerAddr, "address for Raft traffic between members")
	advertiseClient := fs.String("advertise-client-addr", "", "the client address (host:port) this member tells the others and clients, who learn the members from any one of them (default: --client-addr; give it when that is 0.0.0.0 or [::])")
	cluster := fs.String("initial-cluster", "", "all members as name=peer-addr,... (empty: a single node)")
	join := fs.Bool("join", false, "join a running cluster that added this member ('baton member add'): with an empty data dir, wait for the leader's log instead of bootstrapping")
	tick := fs.Duration("tick", d.TickInterval, "Raft tick; elections take election-ticks of them")
	electionTicks := fs.Int("election-ticks", d.ElectionTicks, "ticks without a leader before an election")
	snapEntries := fs.Uint64("snapshot-entries", d.SnapshotEntries, "applied entries between snapshots")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text (key=value) or json (one JSON object a line, for log collectors)")
	pprofOn := fs.Bool("pprof", false, "serve Go's profiler at /debug/pprof/ on the client address")
	certFile := fs.String("cert-file", "", "serve the client port over TLS with this certificate (PEM); with --key-file")
	keyFile := fs.String("key-file", "", "the client port certificate's key (PEM)")
	clientCA := fs.String("client-ca-file", "", "with TLS, admit only clients showing a certificate signed by a CA in this PEM file")
	peerCert := fs.String("peer-cert-file", "", "encrypt Raft traffic with TLS: this member's certificate (PEM), shown both ways; must name this member (--name) as CN or DNS name")
	peerKey := fs.String("peer-key-file", "", "the peer certificate's key (PEM)")
	peerCA := fs.String("peer-ca-file", "", "CA certificates (PEM) that sign the members' peer certificates (and nothing else: not the clients')")
	operators := fs.String("operators", "", "comma-separated client certificate common names that alone may make operator calls (blacklist, cas-release, revoke, member add/promote/remove); needs --client-ca-file")
	removedFlag(fs, "gc-floor-mib", "the member runs Go's garbage collector with the runtime's own settings; set GOGC or GOMEMLIMIT in its environment instead (docs/OPERATIONS.md)")
	handshake := fs.Duration("conn-handshake-timeout", d.ConnHandshakeTimeout, "time a new client connection has to show whether it speaks Baton's session framing, gRPC or HTTP (TLS handshake included; gRPC shows it with its first call, the framing with its hello) and an HTTP request to send its header; then the member closes it")
	idle := fs.Duration("conn-idle-timeout", d.ConnIdleTimeout, "close an HTTP/1 keep-alive connection idle between requests, and a gRPC connection without a call, after this long")
	maxSessions := fs.Int("max-sessions", d.MaxSessions, "live sessions the cluster's leader admits; an open over it gets RESOURCE_EXHAUSTED (TOO_MANY_SESSIONS)")
	maxUserSessions := fs.Int("max-sessions-per-user", d.MaxSessionsPerUser, "with authentication on, live sessions of one user the cluster's leader admits; an open over it gets RESOURCE_EXHAUSTED (TOO_MANY_SESSIONS); 0: no bound")
	kaRate := fs.Int("max-keepalive-rate", d.MaxKeepAliveRate, "keepalives a second one session may send, as many at once; more get RESOURCE_EXHAUSTED (OVERLOADED) without a ReadIndex round")
	minFreeDisk := byteSize(d.MinFreeDisk)
	fs.Var(&minFreeDisk, "min-free-disk", "free space the member keeps in its data dir's file system: a `size` in bytes, or with a unit (512MiB, 2GiB). Below it, while leading, it refuses new sessions and acquires with RESOURCE_EXHAUSTED (NO_SPACE) and goes on serving keepalives, releases, closes and reads, until space is freed. auto is min(256MiB, 2% of the file system); 0 turns it off. A disk that fills all the same stops the member (exit 1) at its next log write, with nothing it acknowledged lost")
	lockDelay := fs.String("lock-delay", "0s", "the lock-delay this member, leading, gives a hold whose acquire states none: `DELAY[,PREFIX=DELAY...]`, a default and one for each name prefix (longest wins), e.g. 15s,jobs/=30s,cache/=0s. When such a hold ends by its session's expiry or its hold limit (not by a release or close), the lock is granted to no one that long, so its holder's last writes drain. Each 0s..60s in whole seconds")
	signedTokens := fs.Bool("signed-tokens", false, "sign every grant this member answers with the cluster's current Ed25519 key (the grant's signed_token; `baton lock` passes it as BATON_SIGNED_TOKEN), which a resource verifies offline with the public keys of GET /v1/keys (`baton keys`, the fence package); leading a cluster without a key, make the first. Needs every member at this release or newer; start every member alike")
	prefixDepth := fs.Int("metrics-prefix-depth", d.MetricsPrefixDepth, "how many '/'-separated segments of a lock's name label its metrics on /metrics: 1 counts jobs/42 under jobs/; 0 labels none. The first 100 prefixes a member meets have series of their own, the rest count under \"other\"")
	maxConns := fs.Int("max-client-conns", d.MaxClientConns, fmt.Sprintf("connections the client port keeps open at most; more are closed as soon as accepted. The default is min(%d, the open file limit - %d), which leaves descriptors for the log, snapshots and peers", embed.MaxClientConnsCeiling, embed.ReservedFiles))
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: baton server [flags]

Runs a Baton member. With no flags: a single node, data in ./baton-data,
client API on 127.0.0.1:7700. Every flag can also be set as BATON_<FLAG>
(e.g. BATON_DATA_DIR); a flag given on the command line wins.

TLS: --cert-file and --key-file serve the client port (API, dashboard,
metrics) over TLS only, --client-ca-file also requires client
certificates, and --operators keeps the operator calls to the clients whose
certificates bear those common names; --peer-cert-file, --peer-key-file
and --peer-ca-file encrypt and authenticate the traffic between members
(every member has them): each member's peer certificate must name it
(--name) as CN or DNS name, and the peer CA should sign member
certificates only, apart from the CA of the clients.

Go's runtime runs as shipped; GOMAXPROCS (members sharing a machine),
GOGC and GOMEMLIMIT in the environment tune it (docs/OPERATIONS.md).

Example, a 3-node cluster on one machine, beside the single node:
  baton server --name n1 --data-dir baton-cluster/n1 --client-addr 127.0.0.1:7810 --peer-addr 127.0.0.1:7811 \
    --initial-cluster n1=127.0.0.1:7811,n2=127.0.0.1:7821,n3=127.0.0.1:7831
  (and n2, n3 with their own addresses and the same --initial-cluster;
  docs/CLUSTER.md has it in full)

Flags:
`)
		fs.PrintDefaults()
	}
	pos, _, code, ok := parseCommand("server", fs, args)
	if !ok {
		return code
	}
	if err := applyEnv(fs); err != nil {
		fmt.Fprintf(os.Stderr, "baton server: %v\n", err)
		return 2
	}
	if err := argCount(pos, 0, 0, nil); err != nil {
		return exitCode("server", err)
	}
	lg, err := serverLogger(os.Stderr, *logFormat, *logLevel)
	if err != nil {
		return exitCode("server", err)
	}
	delays, err := server.ParseLockDelays(*lockDelay)
	if err != nil {
		return exitCode("server", usagef("--lock-delay: %v", err))
	}
	cfg := embed.Config{
		Name: *name, DataDir: *dataDir, ClientAddr: *clientAddr, PeerAddr: *peerAddr, AdvertiseClientAddr: *advertiseClient,
		InitialCluster: *cluster, Join: *join, TickInterval: *tick, ElectionTicks: *electionTicks,
		SnapshotEntries: *snapEntries, Logger: lg,
		MaxClientConns: *maxConns, ConnHandshakeTimeout: *handshake, ConnIdleTimeout: *idle,
		MaxSessions: *maxSessions, MaxSessionsPerUser: *maxUserSessions, MaxKeepAliveRate: *kaRate, MinFreeDisk: int64(minFreeDisk),
		LockDelay: delays.Default, LockDelayByPrefix: delays.ByPrefix, SignedTokens: *signedTokens,
		MetricsPrefixDepth: *prefixDepth,
	}
	if cfg.ClientTLS, err = serverTLS(*certFile, *keyFile, *clientCA); err != nil {
		return exitCode("server", err)
	}
	if cfg.PeerTLS, err = peerTLS(*peerCert, *peerKey, *peerCA); err != nil {
		return exitCode("server", err)
	}
	if *operators != "" {
		if *clientCA == "" {
			return exitCode("server", usagef("--operators needs --client-ca-file: operators are known by their client certificates"))
		}
		for _, o := range strings.Split(*operators, ",") {
			if o = strings.TrimSpace(o); o == "" {
				return exitCode("server", usagef("--operators %q: an empty name", *operators))
			}
			cfg.Operators = append(cfg.Operators, o)
		}
	}
	if *pprofOn {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		cfg.HTTPHandler = mux
	}
	lg.Info("starting", "name", cfg.Name, "data_dir", cfg.DataDir, "client_addr", cfg.ClientAddr, "advertise_client_addr", cfg.AdvertiseClientAddr,
		"peer_addr", cfg.PeerAddr, "initial_cluster", cfg.InitialCluster, "tick", cfg.TickInterval,
		"election_ticks", cfg.ElectionTicks, "snapshot_entries", cfg.SnapshotEntries,
		"max_client_conns", cfg.MaxClientConns, "conn_handshake_timeout", cfg.ConnHandshakeTimeout,
		"conn_idle_timeout", cfg.ConnIdleTimeout, "max_sessions", cfg.MaxSessions, "max_sessions_per_user", cfg.MaxSessionsPerUser,
		"max_keepalive_rate", cfg.MaxKeepAliveRate, "min_free_disk", minFreeDisk.String(), "lock_delay", delays.String())
	m, err := embed.Start(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "baton server: %v\n", err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		lg.Info("stopping", "signal", s.String())
		// A leader hands its office on first, so that its clients retry
		// on the next leader at once instead of waiting out an election.
		// A second signal stops at once.
		ctx, cancel := context.WithTimeout(context.Background(), stepDownTimeout)
		go func() {
			select {
			case <-sig:
				cancel()
			case <-ctx.Done():
			}
		}()
		if m.IsLeader() {
			if err := m.StepDown(ctx); err != nil {
				lg.Warn("could not hand leadership on before stopping; the others elect a leader after their election timeout", "err", err)
			} else if st := m.Status(); st.Leader != st.ID {
				lg.Info("handed leadership on before stopping", "leader", fmt.Sprintf("%x", st.Leader))
			}
		}
		cancel()
		m.Close()
		return 0
	case <-m.Done():
		if errors.Is(m.Err(), embed.ErrRemoved) {
			// The answer to the removal (this member led and removed
			// itself) is on its way out: give it a moment before the
			// connections close, or the caller sees an error for a
			// removal that took effect.
			lg.Info("removed from the cluster; stopping")
			time.Sleep(500 * time.Millisecond)
			m.Close()
			return 0
		}
		// The member stopped serving by itself (a log it cannot write, an
		// entry it cannot apply, a lost data dir): exit, so that a
		// supervisor sees it, rather than answer every request with an
		// error.
		fmt.Fprintf(os.Stderr, "baton server: member stopped: %v\n", m.Err())
		m.Close()
		return 1
	}
}

// serverLogger is the member's logger: to w, in format ("text" or
// "json", slog's handlers), from level ("debug", "info", "warn" or
// "error") up.
func serverLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("--log-format %q: want text or json", format)
}
