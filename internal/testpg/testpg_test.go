package testpg

import (
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestStartServesAndStopRemovesEverything(t *testing.T) {
	s := ForTest(t)
	conn, err := pgx.Connect(t.Context(), s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	var user string
	if err := conn.QueryRow(t.Context(), "SELECT current_user").Scan(&user); err != nil {
		t.Fatal(err)
	}
	if user != "postgres" {
		t.Errorf("connected as %q; want postgres", user)
	}
	conn.Close(t.Context())
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("Stop left %s behind (stat: %v)", s.dir, err)
	}
	select {
	case <-s.done:
	default:
		t.Error("postgres still runs after Stop")
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}
