package fsm

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// BenchmarkApplyGuarded is BenchmarkApply's acquire-release on a session
// with no secret, with a secret (every command carries its hash), and
// with a secret and authentication on (a user whose role has a few
// permissions, the lock's the last): what the trust boundary costs the
// apply path, as ratios of one run.
func BenchmarkApplyGuarded(b *testing.B) {
	hash := sha256.Sum256([]byte("bench secret"))
	for _, guard := range []string{"none", "secret", "secret+auth"} {
		b.Run(guard, func(b *testing.B) {
			m := New()
			index := uint64(0)
			apply := func(cmd *fsmpb.Command) *fsmpb.Result {
				b.Helper()
				index++
				res := m.Apply(index, cmd)
				if err := ErrorOf(res); err != nil {
					b.Fatalf("%v: %v", cmd, err)
				}
				return res
			}
			var secret []byte
			var who string
			if guard != "none" {
				secret = hash[:]
			}
			if guard == "secret+auth" {
				who = "bench"
				for _, op := range []*fsmpb.AuthChange{
					{Kind: fsmpb.AuthChange_ADD_USER, User: "root"},
					{Kind: fsmpb.AuthChange_GRANT_ROLE, User: "root", Role: RootRole},
					{Kind: fsmpb.AuthChange_ADD_ROLE, Role: "r"},
					{Kind: fsmpb.AuthChange_GRANT, Role: "r", Prefix: "a/", Perms: uint32(PermRead)},
					{Kind: fsmpb.AuthChange_GRANT, Role: "r", Prefix: "b/", Perms: uint32(PermLock)},
					{Kind: fsmpb.AuthChange_GRANT, Role: "r", Prefix: "c/", Perms: uint32(PermAll)},
					{Kind: fsmpb.AuthChange_GRANT, Role: "r", Prefix: "free/", Perms: uint32(PermLock)},
					{Kind: fsmpb.AuthChange_ADD_USER, User: who},
					{Kind: fsmpb.AuthChange_GRANT_ROLE, User: who, Role: "r"},
					{Kind: fsmpb.AuthChange_ENABLE},
				} {
					apply(&fsmpb.Command{Principal: "root", Op: &fsmpb.Command_AuthChange{AuthChange: op}})
				}
			}
			id := apply(&fsmpb.Command{Principal: who, Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{
				Owner: "bench", SecretHash: secret}}}).GetSessionId()
			seq := uint64(0)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				name := fmt.Sprintf("free/%d", i%1024)
				i++
				seq++
				tok := apply(&fsmpb.Command{SessionId: id, Seq: seq, SecretHash: secret, Principal: who,
					Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: name}}}).GetAcquire().GetToken()
				seq++
				apply(&fsmpb.Command{SessionId: id, Seq: seq, SecretHash: secret, Principal: who,
					Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: name, Token: tok}}})
			}
		})
	}
}
