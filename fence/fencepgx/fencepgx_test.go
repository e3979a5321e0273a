package fencepgx

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/batonlock/baton/fence"
	"github.com/batonlock/baton/internal/testpg"
)

// TestExecOnPostgres runs fenced updates through pgx on a real
// PostgreSQL, on a connection and in a transaction: lower tokens do not
// apply, equal and higher ones do and are recorded.
func TestExecOnPostgres(t *testing.T) {
	pg := testpg.ForTest(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE accounts (id INT PRIMARY KEY, balance INT NOT NULL, fence BIGINT NOT NULL DEFAULT 0);
		INSERT INTO accounts (id, balance) VALUES (1, 100)`); err != nil {
		t.Fatal(err)
	}
	pay := func(balance int) fence.Update {
		return fence.Update{Table: "accounts", Set: "balance = $1", SetArgs: []any{balance}, Where: "id = $2", WhereArgs: []any{1}}
	}
	for _, step := range []struct {
		balance int
		tok     uint64
		inTx    bool
		applied bool
	}{{90, 5, false, true}, {80, 3, false, false}, {80, 5, true, true}, {70, 9, true, true}, {60, 8, false, false}, {60, 7, true, false}} {
		var applied bool
		if step.inTx {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if applied, err = Exec(ctx, tx, pay(step.balance), step.tok); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		} else if applied, err = Exec(ctx, conn, pay(step.balance), step.tok); err != nil {
			t.Fatal(err)
		}
		if applied != step.applied {
			t.Errorf("token %d: applied %v; want %v", step.tok, applied, step.applied)
		}
	}
	var balance int
	var fenceTok int64
	if err := conn.QueryRow(ctx, "SELECT balance, fence FROM accounts WHERE id = 1").Scan(&balance, &fenceTok); err != nil {
		t.Fatal(err)
	}
	if balance != 70 || fenceTok != 9 {
		t.Errorf("balance %d, fence %d; want 70, 9", balance, fenceTok)
	}
	if _, err := Exec(ctx, conn, pay(1), 0); err == nil {
		t.Error("token 0 was not refused")
	}
}
