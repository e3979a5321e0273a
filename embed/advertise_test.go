package embed_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/embed/embedtest"
)

// TestAdvertiseClientAddr: a member with an advertised client address
// tells it, not the address it is bound to, in its own Status and to the
// other members, whose Status lists it.
func TestAdvertiseClientAddr(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const advertised = "baton-1.example:7700"
		c := embedtest.New(t, 3, embedtest.InMemory(), embedtest.Configure(func(i int, cfg *embed.Config) {
			if i == 0 {
				cfg.AdvertiseClientAddr = advertised
			}
		}))
		c.WaitLeader()
		clientAddrOfN1 := func(i int) string {
			st, err := c.Client(i).Status(context.Background(), &batonpb.StatusRequest{})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range st.GetMembers() {
				if m.GetName() == "n1" {
					return m.GetClientAddr()
				}
			}
			return ""
		}
		for i := range 3 {
			embedtest.WaitFor(t, 10*time.Second, "n1's advertised client address in member "+c.Config(i).Name+"'s Status", func() bool {
				return clientAddrOfN1(i) == advertised
			})
		}
	})
}

func TestAdvertiseClientAddrValidated(t *testing.T) {
	for _, bad := range []string{"0.0.0.0:7700", "[::]:7700", "host", "host:0"} {
		cfg := embed.DefaultConfig()
		cfg.AdvertiseClientAddr = bad
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "advertised client address") {
			t.Errorf("AdvertiseClientAddr %q: Validate() = %v; want an error naming the advertised client address", bad, err)
		}
	}
	cfg := embed.DefaultConfig()
	cfg.AdvertiseClientAddr = "10.0.0.1:7700"
	if err := cfg.Validate(); err != nil {
		t.Errorf("AdvertiseClientAddr 10.0.0.1:7700: %v", err)
	}
}
