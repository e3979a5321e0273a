package fence

import (
	"database/sql"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/batonlock/baton/internal/testpg"
)

func TestUpdateSQL(t *testing.T) {
	u := Update{
		Table: "inventory", Set: "stock = $1, note = $2", SetArgs: []any{9, "x"},
		Where: "item = $3", WhereArgs: []any{"widget"},
	}
	q, args, err := u.SQL(Postgres, 42)
	if err != nil {
		t.Fatal(err)
	}
	if want := "UPDATE inventory SET stock = $1, note = $2, fence = $4 WHERE (item = $3) AND fence <= $4"; q != want {
		t.Errorf("Postgres:\n got %s\nwant %s", q, want)
	}
	if want := []any{9, "x", "widget", int64(42)}; !reflect.DeepEqual(args, want) {
		t.Errorf("Postgres args %v; want %v", args, want)
	}

	m := Update{
		Table: "`inventory`", Set: "stock = ?", SetArgs: []any{9},
		Where: "item = ? OR sku = ?", WhereArgs: []any{"widget", "w-1"}, FenceColumn: "fence_token",
	}
	q, args, err = m.SQL(MySQL, 42)
	if err != nil {
		t.Fatal(err)
	}
	if want := "UPDATE `inventory` SET stock = ?, fence_token = ? WHERE (item = ? OR sku = ?) AND fence_token <= ?"; q != want {
		t.Errorf("MySQL:\n got %s\nwant %s", q, want)
	}
	if want := []any{9, int64(42), "widget", "w-1", int64(42)}; !reflect.DeepEqual(args, want) {
		t.Errorf("MySQL args %v; want %v", args, want)
	}

	for _, bad := range []struct {
		u   Update
		d   Dialect
		tok uint64
	}{
		{u, Postgres, 0},
		{u, Postgres, 1 << 63},
		{u, 0, 42},
		{Update{Table: "t", Set: "a = $1"}, Postgres, 42},
	} {
		if _, _, err := bad.u.SQL(bad.d, bad.tok); err == nil {
			t.Errorf("SQL(%+v, %d, %d) did not refuse", bad.u, bad.d, bad.tok)
		}
	}
}

// openPostgres starts a PostgreSQL for t and returns a database/sql
// handle with a fresh inventory table holding the item "widget".
func openPostgres(t *testing.T) *sql.DB {
	t.Helper()
	pg := testpg.ForTest(t)
	db, err := sql.Open("pgx", pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.ExecContext(t.Context(), `
		CREATE TABLE inventory (item TEXT PRIMARY KEY, stock INT NOT NULL, written_by BIGINT NOT NULL DEFAULT 0,
			fence BIGINT NOT NULL DEFAULT 0);
		INSERT INTO inventory (item, stock) VALUES ('widget', 100)`); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestUpdateOnPostgres runs fenced updates on a real PostgreSQL: a token
// lower than the row's fence does not apply, an equal or higher one does
// and is recorded, and inside a transaction a refusal takes the
// transaction's other writes with it.
func TestUpdateOnPostgres(t *testing.T) {
	db := openPostgres(t)
	ctx := t.Context()
	sell := func(stock int, tok uint64) Update {
		return Update{Table: "inventory", Set: "stock = $1, written_by = $2", SetArgs: []any{stock, int64(tok)},
			Where: "item = $3", WhereArgs: []any{"widget"}}
	}
	for _, step := range []struct {
		stock   int
		tok     uint64
		applied bool
	}{{99, 5, true}, {98, 4, false}, {98, 5, true}, {97, 7, true}, {96, 6, false}, {96, 1, false}} {
		applied, err := sell(step.stock, step.tok).Exec(ctx, db, Postgres, step.tok)
		if err != nil {
			t.Fatal(err)
		}
		if applied != step.applied {
			t.Errorf("token %d: applied %v; want %v", step.tok, applied, step.applied)
		}
	}
	var stock int
	var by, fence int64
	if err := db.QueryRowContext(ctx, "SELECT stock, written_by, fence FROM inventory WHERE item = 'widget'").Scan(&stock, &by, &fence); err != nil {
		t.Fatal(err)
	}
	if stock != 97 || by != 7 || fence != 7 {
		t.Errorf("row: stock %d written by %d, fence %d; want 97 by 7, fence 7", stock, by, fence)
	}
	if applied, err := (Update{Table: "inventory", Set: "stock = 0", Where: "item = $1", WhereArgs: []any{"gadget"}}).
		Exec(ctx, db, Postgres, 99); err != nil || applied {
		t.Errorf("update of a missing row: applied %v, %v", applied, err)
	}

	// In a transaction: the fenced write first, the others only if it
	// applied.
	if _, err := db.ExecContext(ctx, "CREATE TABLE sales (token BIGINT)"); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []uint64{6, 8} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		applied, err := sell(96, tok).Exec(ctx, tx, Postgres, tok)
		if err != nil {
			t.Fatal(err)
		}
		if !applied {
			tx.Rollback()
			continue
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO sales VALUES ($1)", int64(tok)); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	var sales []int64
	rows, err := db.QueryContext(ctx, "SELECT token FROM sales")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s int64
		rows.Scan(&s)
		sales = append(sales, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sales, []int64{8}) {
		t.Errorf("sales %v; want only token 8's", sales)
	}
}

// TestUpdateOnPostgresUnderConcurrency: writers with interleaved tokens
// race on one row, each writing its own token as the row's value. After
// them the row holds the highest token that applied, as its value and its
// fence: a check in one statement and a write in another would let a
// lower token overwrite a higher one.
func TestUpdateOnPostgresUnderConcurrency(t *testing.T) {
	db := openPostgres(t)
	ctx := t.Context()
	const writers, writes = 8, 40
	var mu sync.Mutex
	var maxApplied uint64
	applies, refusals := 0, 0
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(26, uint64(w)))
			for i := range writes {
				tok := uint64(1 + i*writers + rng.IntN(3*writers)) // rising, overlapping the others'
				applied, err := Update{Table: "inventory", Set: "written_by = $1", SetArgs: []any{int64(tok)},
					Where: "item = $2", WhereArgs: []any{"widget"}}.Exec(ctx, db, Postgres, tok)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if applied {
					applies++
					maxApplied = max(maxApplied, tok)
				} else {
					refusals++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var by, fence int64
	if err := db.QueryRowContext(ctx, "SELECT written_by, fence FROM inventory WHERE item = 'widget'").Scan(&by, &fence); err != nil {
		t.Fatal(err)
	}
	if uint64(by) != maxApplied || uint64(fence) != maxApplied {
		t.Errorf("row written by %d, fence %d; want both the highest applied token %d", by, fence, maxApplied)
	}
	if applies == 0 || refusals == 0 {
		t.Errorf("%d applied, %d refused: the writers did not race", applies, refusals)
	}
	t.Logf("%d applied, %d refused; highest %d", applies, refusals, maxApplied)
}
