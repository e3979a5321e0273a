package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/fence"
	"github.com/batonlock/baton/fence/fencepgx"
)

// The modes, in the order they run.
const (
	modeNone   = "none"   // no lock
	modeLock   = "lock"   // a Baton lock, writes unfenced
	modeFenced = "fenced" // a Baton lock, writes fenced by the lock's token
)

var allModes = []string{modeNone, modeLock, modeFenced}

// lockName is the lock every worker takes in the lock modes.
const lockName = "examples/inventory/widget"

// item is the one item sold.
const item = "widget"

// config is one run of the scenario.
type config struct {
	workers int
	stock   int
	dsn     string // PostgreSQL
	baton   string // Baton's endpoints
	// pausedTTL is the session TTL of worker 0, which pauses longer than
	// it; the others' sessions have otherTTL.
	pausedTTL, otherTTL time.Duration
	// pauseLimit bounds worker 0's pause: the others must sell within it.
	pauseLimit time.Duration
}

// result is what one mode did to the stock.
type result struct {
	Mode          string  `json:"mode"`
	Stock         int     `json:"stock"`          // items on sale at the start
	Sold          int     `json:"sold"`           // sales recorded
	Oversold      int     `json:"oversold"`       // sold less stock: items that did not exist
	DoubleSold    int     `json:"double_sold"`    // sales of a unit already sold
	RefusedWrites int     `json:"refused_writes"` // writes the database refused (fenced mode)
	FinalStock    int     `json:"final_stock"`    // the stock column at the end
	PausedWrite   string  `json:"paused_write"`   // what became of worker 0's write after its pause
	Seconds       float64 `json:"seconds"`
}

// runMode sells the whole stock with cfg.workers workers in mode, from a
// fresh table, and reports what was sold.
//
// Every mode pauses worker 0 once, in its first sale, between reading
// the stock (and, holding a lock, checking that its Lease is still valid)
// and writing the sale: the others start only then, and worker 0 goes on
// only once another worker has sold. In the lock modes the pause also
// holds back all of worker 0's traffic to Baton, as a process paused
// (by its collector, swapping, a slow disk) sends no keepalives: the
// others get the lock only after worker 0's session expires on the
// server, a TTL later. After its late write worker 0 stops; a real
// process would notice its lost session and start over.
func runMode(ctx context.Context, cfg config, mode string) (result, error) {
	start := time.Now()
	if err := resetTables(ctx, cfg.dsn, cfg.stock); err != nil {
		return result{}, err
	}
	r := &run{cfg: cfg, mode: mode, paused: make(chan struct{}), otherSold: make(chan struct{})}
	workers := make([]*worker, cfg.workers)
	defer func() {
		for _, w := range workers {
			if w != nil {
				w.close()
			}
		}
	}()
	for i := range workers {
		w, err := r.newWorker(ctx, i)
		if err != nil {
			return result{}, err
		}
		workers[i] = w
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(workers))
	for _, w := range workers {
		go func() {
			if w.id != 0 {
				select {
				case <-r.paused:
				case <-ctx.Done():
					errs <- ctx.Err()
					return
				}
			}
			err := r.sell(ctx, w)
			if err != nil {
				cancel()
				err = fmt.Errorf("%s mode, worker %d: %w", mode, w.id, err)
			}
			errs <- err
		}()
	}
	var err error
	for range workers {
		err = errors.Join(err, ignoreCancel(<-errs))
	}
	if err != nil {
		return result{}, err
	}
	res, err := count(ctx, workers[0].db, mode, cfg.stock)
	res.RefusedWrites = int(r.refused.Load())
	res.PausedWrite = r.pausedWrite
	res.Seconds = time.Since(start).Seconds()
	return res, err
}

// ignoreCancel drops the context.Canceled of a worker stopped because
// another failed, so that the first failure is the one reported.
func ignoreCancel(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// run is one mode's shared state.
type run struct {
	cfg  config
	mode string

	paused      chan struct{} // closed when worker 0 pauses: the others start
	otherSold   chan struct{} // closed when another worker sold after that
	otherOnce   sync.Once
	refused     atomic.Int64
	pausedWrite string // set by worker 0 alone, read after every worker ended
}

// worker is one seller: its own database connection and, in the lock
// modes, its own Baton client and session, as a separate process has.
type worker struct {
	id      int
	db      *pgx.Conn
	gate    *gate // holds back the Baton connection while frozen
	client  *baton.Client
	session *baton.Session
}

func (r *run) newWorker(ctx context.Context, id int) (*worker, error) {
	w := &worker{id: id, gate: newGate()}
	var err error
	if w.db, err = pgx.Connect(ctx, r.cfg.dsn); err != nil {
		return nil, err
	}
	if r.mode == modeNone {
		return w, nil
	}
	if w.client, err = baton.Dial(ctx, r.cfg.baton, baton.WithDialOptions(grpc.WithContextDialer(w.gate.dial))); err != nil {
		w.close()
		return nil, err
	}
	ttl := r.cfg.otherTTL
	if id == 0 {
		ttl = r.cfg.pausedTTL
	}
	if w.session, err = w.client.NewSession(ctx, baton.WithTTL(ttl), baton.WithOwner(fmt.Sprintf("inventory/worker-%d", id))); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *worker) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if w.session != nil {
		w.session.Close(ctx) // worker 0's is gone already
	}
	if w.client != nil {
		w.client.Close()
	}
	if w.db != nil {
		w.db.Close(ctx)
	}
}

// sell sells items until the stock is gone, each sale under the lock in
// the lock modes. Worker 0 stops after its paused sale.
func (r *run) sell(ctx context.Context, w *worker) error {
	for {
		var lease *baton.Lease
		if w.session != nil {
			var err error
			if lease, err = w.session.Mutex(lockName).Lock(ctx); err != nil {
				return err
			}
		}
		var stock int
		if err := w.db.QueryRow(ctx, "SELECT stock FROM baton_inventory WHERE item = $1", item).Scan(&stock); err != nil {
			return err
		}
		if stock == 0 {
			return release(ctx, lease)
		}
		if lease != nil && !lease.Valid() {
			// The careful holder checks before writing; the pause below
			// comes after the check, as a real one can.
			if err := release(ctx, lease); err != nil {
				return err
			}
			continue
		}
		paused := false
		if w.id == 0 && r.pausedWrite == "" {
			paused = true
			if err := r.pause(ctx, w); err != nil {
				return err
			}
		}
		applied, err := r.write(ctx, w, stock, lease)
		if err != nil {
			return err
		}
		if !applied {
			r.refused.Add(1)
		}
		if paused {
			r.pausedWrite = map[bool]string{true: "applied", false: "refused"}[applied]
			return nil // its session is gone (lock modes); it stops
		}
		if applied && w.id != 0 {
			r.otherOnce.Do(func() { close(r.otherSold) })
		}
		if err := release(ctx, lease); err != nil {
			return err
		}
	}
}

// pause is worker 0's pause: its Baton connection frozen, it lets the
// others start and waits until one of them has sold.
func (r *run) pause(ctx context.Context, w *worker) error {
	w.gate.freeze()
	defer w.gate.thaw()
	close(r.paused)
	limit := time.NewTimer(r.cfg.pauseLimit)
	defer limit.Stop()
	select {
	case <-r.otherSold:
		return nil
	case <-limit.C:
		return fmt.Errorf("no other worker sold within %v of worker 0's pause", r.cfg.pauseLimit)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// write records the sale of unit stock and sets the stock to one less, in
// one transaction: unfenced, or fenced by the Lease's token in the fenced
// mode, where it reports false if the database refused the token.
func (r *run) write(ctx context.Context, w *worker, stock int, lease *baton.Lease) (applied bool, err error) {
	tx, err := w.db.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx) // after Commit, a no-op
	var token uint64
	if lease != nil {
		token = lease.Token()
	}
	if r.mode == modeFenced {
		applied, err := fencepgx.Exec(ctx, tx, fence.Update{
			Table: "baton_inventory", Set: "stock = $1", SetArgs: []any{stock - 1},
			Where: "item = $2", WhereArgs: []any{item},
		}, token)
		if err != nil || !applied {
			return false, err
		}
	} else if _, err := tx.Exec(ctx, "UPDATE baton_inventory SET stock = $1 WHERE item = $2", stock-1, item); err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO baton_sales (item, unit, worker, token) VALUES ($1, $2, $3, $4)",
		item, stock, w.id, int64(token)); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// release releases lease, if any.
func release(ctx context.Context, lease *baton.Lease) error {
	if lease == nil {
		return nil
	}
	return lease.Release(ctx)
}

// resetTables makes the tables anew, with stock units of the item.
func resetTables(ctx context.Context, dsn string, stock int) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `
		DROP TABLE IF EXISTS baton_inventory, baton_sales;
		CREATE TABLE baton_inventory (item TEXT PRIMARY KEY, stock INT NOT NULL, fence BIGINT NOT NULL DEFAULT 0);
		CREATE TABLE baton_sales (id BIGSERIAL PRIMARY KEY, item TEXT NOT NULL, unit INT NOT NULL,
			worker INT NOT NULL, token BIGINT NOT NULL);
		INSERT INTO baton_inventory (item, stock) VALUES ('`+item+`', `+fmt.Sprint(stock)+`)`)
	return err
}

// count reads what mode sold.
func count(ctx context.Context, db *pgx.Conn, mode string, stock int) (result, error) {
	res := result{Mode: mode, Stock: stock}
	var units int
	if err := db.QueryRow(ctx, "SELECT count(*), count(DISTINCT unit) FROM baton_sales").Scan(&res.Sold, &units); err != nil {
		return res, err
	}
	if err := db.QueryRow(ctx, "SELECT stock FROM baton_inventory WHERE item = $1", item).Scan(&res.FinalStock); err != nil {
		return res, err
	}
	res.Oversold = res.Sold - stock
	res.DoubleSold = res.Sold - units
	return res, nil
}

// gate holds back a connection's reads and writes while frozen, as a
// paused process neither sends nor handles what arrives.
type gate struct {
	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
}

func newGate() *gate {
	g := &gate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gate) freeze() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *gate) thaw() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.open)
}

func (g *gate) wait() {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	<-ch
}

// dial connects to a member, the connection going through the gate.
func (g *gate) dial(ctx context.Context, addr string) (net.Conn, error) {
	g.wait()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: c, g: g}, nil
}

type gatedConn struct {
	net.Conn
	g *gate
}

func (c *gatedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.g.wait()
	return n, err
}

func (c *gatedConn) Write(b []byte) (int, error) {
	c.g.wait()
	return c.Conn.Write(b)
}
