package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton/internal/testpki"
)

// TestCLITLS: `baton server` with a TLS client port that requires client
// certificates; the CLI reaches it with --cacert/--cert/--key (or the
// BATON_ variables) and not without them.
func TestCLITLS(t *testing.T) {
	skipShort(t)
	pki, err := testpki.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	addrs := freeLoopbackAddrs(t, 2)
	c := newCluster(t, clusterConfig{n: 1, clientAddrs: addrs[:1], peerAddrs: addrs[1:],
		extraArgs: []string{"--cert-file", pki.CertFile, "--key-file", pki.KeyFile, "--client-ca-file", pki.CAFile,
			"--operators", testpki.OperatorName}})
	if err := c.nodes[0].start(c.bin); err != nil {
		t.Fatal(err)
	}
	tlsArgs := []string{"--endpoints", addrs[0], "--timeout", "3s", "--cacert", pki.CAFile, "--cert", pki.ClientCertFile, "--key", pki.ClientKeyFile}
	run := func(env []string, args ...string) (string, int) {
		cmd := exec.Command(c.bin, args...)
		cmd.Env = append(serverEnv(), env...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, code := run(nil, append([]string{"status"}, tlsArgs...)...)
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("baton status over TLS: exit %d: %s", code, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, code := run(nil, append(append([]string{"lock"}, tlsArgs...), "tls/job", "--", "sh", "-c", `echo "token=$BATON_TOKEN"`)...)
	if code != 0 || !strings.Contains(out, "token=") {
		t.Fatalf("baton lock over TLS: exit %d: %s", code, out)
	}
	env := []string{"BATON_ENDPOINTS=" + addrs[0], "BATON_CACERT=" + pki.CAFile, "BATON_CERT=" + pki.ClientCertFile, "BATON_KEY=" + pki.ClientKeyFile}
	if out, code := run(env, "locks"); code != 0 {
		t.Fatalf("baton locks with TLS from the environment: exit %d: %s", code, out)
	}
	if out, code := run(nil, "status", "--endpoints", addrs[0], "--timeout", "2s"); code == 0 {
		t.Fatalf("baton status in plaintext to a TLS member succeeded: %s", out)
	}
	if out, code := run(nil, "status", "--endpoints", addrs[0], "--timeout", "2s", "--cacert", pki.CAFile); code == 0 {
		t.Fatalf("baton status without a client certificate succeeded: %s", out)
	}
	if out, code := run(nil, "status", "--endpoints", addrs[0], "--cert", pki.ClientCertFile); code != 2 || !strings.Contains(out, "--key") {
		t.Fatalf("--cert without --key: exit %d (want 2): %s", code, out)
	}
	// Operator calls: the client's certificate is refused, the operator's
	// is let through (to the session's NotFound).
	if out, code := run(nil, append([]string{"blacklist", "999999"}, tlsArgs...)...); code != 1 || !strings.Contains(out, "PermissionDenied") || !strings.Contains(out, "--operators") {
		t.Fatalf("baton blacklist by a client that is no operator: exit %d: %s", code, out)
	}
	opArgs := []string{"--endpoints", addrs[0], "--timeout", "3s", "--cacert", pki.CAFile, "--cert", pki.OperatorCertFile, "--key", pki.OperatorKeyFile}
	if out, code := run(nil, append([]string{"blacklist", "999999"}, opArgs...)...); code != 1 || !strings.Contains(out, "not found") {
		t.Fatalf("baton blacklist of an unknown session by an operator: exit %d: %s", code, out)
	}
	if out, code := run(nil, "server", "--operators", "ops", "--data-dir", t.TempDir()); code != 2 || !strings.Contains(out, "--client-ca-file") {
		t.Fatalf("--operators without --client-ca-file: exit %d (want 2): %s", code, out)
	}
}
