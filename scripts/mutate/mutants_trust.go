package main

import "time"

// The trust boundary: who a request comes from (bearer tokens, client
// certificates, session secrets), what that caller may do (the state
// machine's permissions, the API's reads and operator calls), the limits
// no client may exceed, members that prove who they are, and the fence
// kit that carries a holder's token to storage. Their tests are cheaper
// than the simulation: each check runs the package, or only the tests of
// the rule, named.
var (
	fenceTests     = check{"fence", []string{"./fence/..."}, 2 * time.Minute}
	serverTests    = check{"server", []string{"./internal/server"}, time.Minute}
	transportTests = check{"transport", []string{"./internal/transport"}, 3 * time.Minute}
	// The client's tests against a member with authentication on.
	clientAuthTests = check{"client-auth", []string{"-run", "^Test(Auth|MaxSessionsPerUser$|SaveSnapshotNeedsAdmin$)", "."}, 3 * time.Minute}
	// The member's limits, as a client meets them.
	embedLimitTests = check{"embed-limits", []string{"-run", "^Test(ClientConnLimit|ConnTimeouts|MaxSessions|KeepAliveRate|HTTPErrors|OversizedRequestRefused|FramingRefusesMalformedStreams)$", "./embed"}, 3 * time.Minute}
	// Operators named by client certificates (embedtest members over TLS).
	operatorTests = check{"operators", []string{"-run", "^TestOperators$", "./e2e"}, 3 * time.Minute}
	// Strangers who know a session's id and its locks' tokens.
	strangerTests = check{"strangers", []string{"-run", "^Test(Stranger|SessionSecret)", "./e2e"}, 3 * time.Minute}
	// Signed tokens of real grants, verified as a resource would.
	signedTests = check{"signed", []string{"-run", "^TestSigned(Tokens|TokenThroughMiddleware|ingKeyRotation)$", "./e2e"}, 3 * time.Minute}
	// The dashboard's feed and a browser's posts to a member.
	dashboardTests = check{"dashboard", []string{"-run", "^TestDashboardFeed(Auth)?$", "./e2e"}, 3 * time.Minute}
)

// The state machine's scripts, its rules one command at a time, before
// the whole package: most of its mutants fall there in seconds.
var fsmScripts = check{"fsm-scripts", []string{"-run", "^(TestScripts|FuzzAuthDecisions)$", "./internal/fsm"}, 2 * time.Minute}

var (
	fsmAuthChecks = []check{fsmScripts, fsmTests, clientAuthTests}
	authChecks    = []check{clientAuthTests}
)

func init() { mutants = append(mutants, trustMutants...) }

var trustMutants = []mutant{
	// A watch open when its user loses read over its lock.
	{
		name: "server/watch-not-checked-after-an-auth-change", file: "internal/server/watch.go", checks: authChecks,
		from: "if g := s.watches.authGen.Load(); g != authGen {",
		to:   "if g := s.watches.authGen.Load(); g != authGen && false {",
	},
	{
		name: "server/watchers-not-woken-by-an-auth-change", file: "internal/server/watch.go", checks: authChecks,
		from: "\t\t\t\t\tpoke(w.wake)\n",
		to:   "\t\t\t\t\t_ = w\n",
	},
	{
		name: "client/watch-resumed-after-permission-denied", file: "watch.go", checks: authChecks,
		from: "return errors.Is(err, ErrClientClosed) || errors.Is(err, ErrPermissionDenied) || errors.Is(err, ErrUnauthenticated)",
		to:   "return errors.Is(err, ErrClientClosed)",
	},
	// Authentication in the API: a request names a user by a bearer
	// token or a verified client certificate, or is refused.
	{
		name: "server/authentication-never-on", file: "internal/server/principals.go", checks: authChecks,
		from: "\tv := s.authView()\n\tif !v.enabled {\n\t\treturn \"\", nil\n\t}",
		to:   "\tv := s.authView()\n\tif true {\n\t\treturn \"\", nil\n\t}",
	},
	{
		name: "server/unknown-bearer-token-passes-as-nobody", file: "internal/server/principals.go", checks: authChecks,
		from: "return \"\", unauthenticatedf(\"the bearer token names no user\")",
		to:   "return \"\", nil",
	},
	{
		name: "server/no-credential-passes-as-nobody", file: "internal/server/principals.go", checks: authChecks,
		from: "return \"\", unauthenticatedf(\"authentication is on: show a bearer token",
		to:   "return \"\", nil\n\treturn \"\", unauthenticatedf(\"authentication is on: show a bearer token",
	},
	{
		name: "server/certificate-of-no-user-accepted", file: "internal/server/principals.go", checks: authChecks,
		from: "\t\tif v.users[cn] {\n",
		to:   "\t\tif cn != \"\" {\n",
	},
	{
		name: "server/unverified-certificate-names-a-user", file: "internal/server/auth.go", checks: authChecks,
		from: "if st == nil || len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {",
		to:   "if st == nil || len(st.PeerCertificates) == 0 {",
	},
	{
		name: "server/auth-change-leaves-the-view-stale", file: "internal/server/server.go", checks: authChecks,
		from: "\tif cmd.GetAuthChange() != nil {\n\t\ts.authCache.dirty.Store(true)\n",
		to:   "\tif cmd.GetAuthChange() != nil {\n",
	},
	{
		name: "server/keepalive-without-credential", file: "internal/server/keepalive.go", checks: authChecks,
		from: "\t\treturn nil, invalidf(\"session_id is required\")\n\t}\n\tif _, err := s.principal(ctx); err != nil {\n\t\treturn nil, err\n\t}\n\tif err := s.admitKeepAlive(",
		to:   "\t\treturn nil, invalidf(\"session_id is required\")\n\t}\n\tif err := s.admitKeepAlive(",
	},
	{
		name: "server/hold-renewal-without-credential", file: "internal/server/keepalive.go", checks: authChecks,
		from: "\tif _, err := s.principal(ctx); err != nil {\n\t\treturn nil, err\n\t}\n\tif err := s.tracker.CheckHold(",
		to:   "\tif err := s.tracker.CheckHold(",
	},

	// Authorization in the API: reads, operator calls and the admin's
	// calls that make no command of their own.
	{
		name: "server/get-reads-without-read-permission", file: "internal/server/unary.go", checks: authChecks,
		from: "\tout := &batonpb.GetResponse{}\n\ts.node.View(func(m *fsm.Machine) {\n\t\tif err = mayRead(m, who, r.GetName()); err != nil {",
		to:   "\tout := &batonpb.GetResponse{}\n\ts.node.View(func(m *fsm.Machine) {\n\t\tif _ = mayRead(m, who, r.GetName()); false {",
	},
	{
		name: "server/sessions-listed-without-read-over-every-name", file: "internal/server/unary.go", checks: authChecks,
		from: "if err = mayRead(m, who, \"\"); err != nil { // sessions are no prefix's",
		to:   "if _ = mayRead(m, who, \"\"); false { // sessions are no prefix's",
	},
	{
		name: "server/audit-read-without-read-over-every-name", file: "internal/server/authapi.go", checks: authChecks,
		from: "\tout := &batonpb.AuditResponse{}\n\ts.node.View(func(m *fsm.Machine) {\n\t\tif err = mayRead(m, who, \"\"); err != nil {",
		to:   "\tout := &batonpb.AuditResponse{}\n\ts.node.View(func(m *fsm.Machine) {\n\t\tif _ = mayRead(m, who, \"\"); false {",
	},
	{
		name: "server/auth-state-read-without-read-over-every-name", file: "internal/server/authapi.go", checks: authChecks,
		from: "\tout := &batonpb.GetAuthResponse{You: who}\n\ts.node.View(func(m *fsm.Machine) {\n\t\tif err = mayRead(m, who, \"\"); err != nil {",
		to:   "\tout := &batonpb.GetAuthResponse{You: who}\n\ts.node.View(func(m *fsm.Machine) {\n\t\tif _ = mayRead(m, who, \"\"); false {",
	},
	{
		name: "server/member-admin-needs-no-admin-permission", file: "internal/server/members.go", checks: authChecks,
		from: "\tif err == nil && s.authView().enabled {\n\t\ts.node.View(func(m *fsm.Machine) { err = may(m, who, \"\", fsm.PermAdmin) })",
		to:   "\tif err == nil && s.authView().enabled && false {\n\t\ts.node.View(func(m *fsm.Machine) { err = may(m, who, \"\", fsm.PermAdmin) })",
	},
	{
		name: "server/leader-transfer-by-anyone", file: "internal/server/leader.go", checks: authChecks,
		from: "who, err := s.memberAdmin(ctx, \"TransferLeadership\")",
		to:   "who, err := s.principal(ctx)",
	},
	{
		name: "server/operators-unrestricted", file: "internal/server/auth.go", checks: []check{operatorTests},
		from: "\tif len(s.cfg.Operators) == 0 {\n\t\treturn nil\n\t}",
		to:   "\tif true {\n\t\treturn nil\n\t}",
	},
	{
		name: "server/any-certificate-is-an-operator", file: "internal/server/auth.go", checks: []check{operatorTests},
		from: "\tcase !slices.Contains(s.cfg.Operators, cn):",
		to:   "\tcase !slices.Contains(s.cfg.Operators, cn) && false:",
	},

	{
		name: "server/auth-change-not-an-operator-call", file: "internal/server/authapi.go", checks: []check{operatorTests},
		from: "who, err := s.operator(ctx, \"ChangeAuth\")",
		to:   "who, err := s.principal(ctx)",
	},
	{
		name: "server/revoke-not-an-operator-call", file: "internal/server/unary.go", checks: []check{operatorTests},
		from: "who, err := s.operator(ctx, \"Revoke\")",
		to:   "who, err := s.principal(ctx)",
	},
	{
		name: "server/key-rotation-not-an-operator-call", file: "internal/server/signing.go", checks: []check{operatorTests},
		from: "who, err := s.operator(ctx, \"RotateSigningKey\")",
		to:   "who, err := s.principal(ctx)",
	},
	{
		name: "server/check-reads-without-read-permission", file: "internal/server/unary.go", checks: authChecks,
		from: "\tout := &batonpb.CheckResponse{}\n\ts.node.View(func(m *fsm.Machine) {\n\t\tif err = mayRead(m, who, r.GetName()); err != nil {",
		to:   "\tout := &batonpb.CheckResponse{}\n\ts.node.View(func(m *fsm.Machine) {\n\t\tif _ = mayRead(m, who, r.GetName()); false {",
	},
	{
		name: "server/history-reads-without-read-permission", file: "internal/server/unary.go", checks: authChecks,
		from: "\tout := &batonpb.HistoryResponse{}\n\ts.node.View(func(m *fsm.Machine) {\n\t\tif err = mayRead(m, who, r.GetName()); err != nil {",
		to:   "\tout := &batonpb.HistoryResponse{}\n\ts.node.View(func(m *fsm.Machine) {\n\t\tif _ = mayRead(m, who, r.GetName()); false {",
	},
	{
		name: "server/watch-without-read-permission", file: "internal/server/watch.go", checks: authChecks,
		from: "if err = mayRead(m, who, name); err == nil {",
		to:   "if _ = mayRead(m, who, name); true {",
	},

	{
		name: "server/cross-site-post-served", file: "internal/server/listen.go", checks: []check{dashboardTests},
		from: "Handler: crossOriginProtection().Handler(mux),",
		to:   "Handler: mux,",
	},
	{
		name: "server/signed-token-of-a-shared-hold-says-exclusive", file: "internal/server/signing.go", checks: []check{signedTests},
		from: "\tif mode.shared {\n\t\tc.Mode = fence.Shared\n\t}\n",
		to:   "",
	},
	{
		name: "server/signed-token-without-its-hold-limit", file: "internal/server/signing.go", checks: []check{signedTests},
		from: "Issued: time.Now(), HoldLimit: time.Duration(mode.holdLimit)}",
		to:   "Issued: time.Now()}",
	},
	{
		name: "server/signed-token-names-no-session", file: "internal/server/signing.go", checks: []check{signedTests},
		from: "Lock: lock, Token: token, Session: session,",
		to:   "Lock: lock, Token: token,",
	},

	{
		name: "server/operator-call-without-a-certificate", file: "internal/server/auth.go", checks: []check{operatorTests},
		from: "\tcase !ok:\n\t\treturn status.Errorf(codes.PermissionDenied, \"%s is an operator call: show a client certificate",
		to:   "\tcase !ok && false:\n\t\treturn status.Errorf(codes.PermissionDenied, \"%s is an operator call: show a client certificate",
		accepted: "guarded by embed.Config.Validate: Operators needs ClientTLS with tls.RequireAndVerifyClientCert, so every caller " +
			"showed a verified certificate, and no operator name may be empty, so the empty name of a caller without one is never an operator's",
	},

	// Limits no client can exceed.
	{
		name: "server/user-over-session-limit-not-refused", file: "internal/server/limits.go", checks: []check{clientAuthTests, serverTests},
		from: "\t\tcase lim.perUser > 0 && users >= lim.perUser:",
		to:   "\t\tcase lim.perUser > 0 && users > lim.perUser:",
	},
	{
		name: "server/user-sessions-not-counted", file: "internal/server/limits.go", checks: authChecks,
		from: "user != \"\" && s.cfg.Limits.MaxSessionsPerUser > 0 {",
		to:   "user != \"\" && s.cfg.Limits.MaxSessionsPerUser < 0 {",
	},
	{
		name: "server/user-opens-in-flight-not-counted", file: "internal/server/limits.go", checks: []check{serverTests, clientAuthTests},
		from: "users+o.byUser[lim.user] < lim.perUser",
		to:   "users < lim.perUser",
	},
	{
		name: "server/open-over-session-limit-not-refused", file: "internal/server/limits.go", checks: []check{embedLimitTests, serverTests},
		from: "\t\tcase lim.total > 0 && live >= lim.total:",
		to:   "\t\tcase lim.total > 0 && live > lim.total:",
	},
	{
		name: "server/client-conn-over-limit", file: "internal/server/listen.go", checks: []check{embedLimitTests},
		from: "if l.max > 0 && len(l.conns) >= l.max {",
		to:   "if l.max > 0 && len(l.conns) > l.max {",
	},
	{
		name: "server/keepalive-rate-unbounded", file: "internal/server/keepalive.go", checks: []check{embedLimitTests},
		from: "err := s.tracker.Admit(id, shown, received, rate)",
		to:   "err := s.tracker.Admit(id, shown, received, 0)",
	},
	{
		name: "server/http-request-body-over-the-limit", file: "internal/server/listen.go", checks: []check{embedLimitTests},
		from: "mux.Handle(\"/v1/\", limitBody(gw, rules.MaxRequestBytes))",
		to:   "mux.Handle(\"/v1/\", limitBody(gw, 2*rules.MaxRequestBytes))",
	},
	{
		name: "server/grpc-request-over-the-limit", file: "internal/server/listen.go", checks: []check{embedLimitTests},
		from: "grpc.MaxRecvMsgSize(rules.MaxRequestBytes),",
		to:   "grpc.MaxRecvMsgSize(2 * rules.MaxRequestBytes),",
	},
	{
		name: "server/framed-request-over-the-limit", file: "internal/server/streamconn.go", checks: []check{embedLimitTests},
		from: "kind, payload, err := st.r.Next(rules.MaxRequestBytes)",
		to:   "kind, payload, err := st.r.Next(2 * rules.MaxRequestBytes)",
	},
	{
		name: "server/http-header-read-without-timeout", file: "internal/server/listen.go", checks: []check{embedLimitTests},
		from: "ReadHeaderTimeout: lim.HandshakeTimeout,",
		to:   "ReadHeaderTimeout: 0,",
	},
	{
		name: "server/protocol-sniff-without-timeout", file: "internal/server/listen.go", checks: []check{embedLimitTests},
		from: "m.SetReadTimeout(lim.HandshakeTimeout)",
		to:   "m.SetReadTimeout(0)",
	},
	{
		name: "server/backups-unbounded", file: "internal/server/backup.go", checks: []check{serverTests},
		from: "if s.backups.Add(1) > MaxBackups {",
		to:   "if s.backups.Add(1) > 2*MaxBackups {",
	},

	// The state machine's authorization: the user a command names, the
	// session it acts for, the permission over each lock it names.
	{
		name: "fsm/session-secret-not-checked", file: "internal/fsm/machine.go", checks: fsmAuthChecks,
		from: "if !s.secretHash.Admits(cmd.GetSecretHash()) {",
		to:   "if false {",
	},
	{
		name: "fsm/another-users-session-acts", file: "internal/fsm/auth.go", checks: fsmAuthChecks,
		from: "if s != nil && s.principal != \"\" && s.principal != who {",
		to:   "if false {",
	},
	{
		name: "fsm/unknown-user-passes", file: "internal/fsm/auth.go", checks: fsmAuthChecks,
		from: "\tif m.auth.users[who] == nil {\n",
		to:   "\tif m.auth.users[who] == nil && false {\n",
	},
	{
		name: "fsm/permission-over-any-prefix", file: "internal/fsm/auth.go", checks: fsmAuthChecks,
		from: "return m.permits(principal, p, func(prefix string) bool { return strings.HasPrefix(name, prefix) })",
		to:   "return m.permits(principal, p, func(prefix string) bool { return true })",
	},
	{
		name: "fsm/lock-set-checks-its-first-lock-only", file: "internal/fsm/auth.go", checks: fsmAuthChecks,
		from: "for _, l := range op.AcquireMany.GetLocks() {\n\t\t\tif err := need(l, PermLock); err != nil {",
		to:   "for _, l := range op.AcquireMany.GetLocks()[:1] {\n\t\t\tif err := need(l, PermLock); err != nil {",
	},
	{
		name: "fsm/cas-release-needs-lock-not-admin", file: "internal/fsm/auth.go", checks: fsmAuthChecks,
		from: "return need(op.CasRelease.GetLock(), PermAdmin)",
		to:   "return need(op.CasRelease.GetLock(), PermLock)",
	},
	{
		name: "fsm/revoke-needs-lock-not-admin", file: "internal/fsm/auth.go", checks: fsmAuthChecks,
		from: "return need(op.RevokeHold.GetLock(), PermAdmin)",
		to:   "return need(op.RevokeHold.GetLock(), PermLock)",
	},
	{
		name: "fsm/auth-change-by-non-admin", file: "internal/fsm/auth.go", checks: fsmAuthChecks,
		from: "case *fsmpb.Command_BlacklistSession, *fsmpb.Command_AuthChange, *fsmpb.Command_AuditNote, *fsmpb.Command_RotateSigningKey:",
		to:   "case *fsmpb.Command_BlacklistSession, *fsmpb.Command_AuditNote, *fsmpb.Command_RotateSigningKey:",
	},
	{
		name: "fsm/any-key-rotation-is-the-first", file: "internal/fsm/auth.go", checks: fsmAuthChecks,
		from: "if op.RotateSigningKey.GetFirst() {",
		to:   "if true {",
	},
	{
		name: "fsm/open-without-lock-permission", file: "internal/fsm/auth.go", checks: fsmAuthChecks,
		from: "if !m.allowedSomewhere(who, PermLock) {",
		to:   "if false {",
	},
	{
		name: "fsm/two-users-share-a-token", file: "internal/fsm/auth.go", checks: fsmAuthChecks,
		from: "if _, used := st.tokens[h]; used {",
		to:   "if _, used := st.tokens[h]; used && false {",
	},
	{
		name: "fsm/last-root-deleted", file: "internal/fsm/auth.go", checks: fsmAuthChecks,
		from: "if st.enabled && slices.Contains(u.roles, RootRole) && m.rootUsers() == 1 {",
		to:   "if false {",
	},
	{
		name: "fsm/user-sessions-not-counted", file: "internal/fsm/session.go", checks: []check{fsmScripts, fsmTests, clientAuthTests},
		from: "\t\tm.byPrincipal[s.principal]++\n",
		to:   "",
	},

	{
		name: "fsm/no-secret-admitted", file: "internal/fsm/session.go", checks: []check{fsmScripts, fsmTests, strangerTests},
		from: "return !h.IsSet() || subtle.ConstantTimeCompare(h[:], shown) == 1",
		to:   "return !h.IsSet() || len(shown) == 0 || subtle.ConstantTimeCompare(h[:], shown) == 1",
	},
	{
		name: "fsm/proclaim-without-lock-permission", file: "internal/fsm/auth.go", checks: fsmAuthChecks,
		from: "return need(op.Proclaim.GetLock(), PermLock)",
		to:   "return nil",
	},
	{
		name: "fsm/blacklist-by-non-admin", file: "internal/fsm/auth.go", checks: fsmAuthChecks,
		from: "case *fsmpb.Command_BlacklistSession, *fsmpb.Command_AuthChange,",
		to:   "case *fsmpb.Command_AuthChange,",
	},
	{
		name: "fsm/one-of-the-permissions-asked-suffices", file: "internal/fsm/auth.go", checks: fsmAuthChecks,
		from: "if Perm(g.GetPerms())&p == p && covers(g.GetPrefix()) {",
		to:   "if Perm(g.GetPerms())&p != 0 && covers(g.GetPrefix()) {",
		accepted: "equivalent: every check (the state machine's and the API's) asks for one permission, read, lock or admin, " +
			"and for one bit the two tests agree",
	},
	{
		name: "fsm/session-over-its-hold-limit", file: "internal/fsm/lock.go", checks: []check{fsmScripts, fsmTests},
		from: "\n\tif s.load() >= MaxHoldsPerSession {",
		to:   "\n\tif s.load() > MaxHoldsPerSession {",
	},
	{
		name: "fsm/lock-over-its-waiter-limit", file: "internal/fsm/lock.go", checks: []check{fsmScripts, fsmTests},
		from: "if len(l.waiters()) >= MaxWaitersPerLock {",
		to:   "if len(l.waiters()) > MaxWaitersPerLock {",
	},
	{
		name: "fsm/lock-set-over-the-hold-limit", file: "internal/fsm/many.go", checks: []check{fsmScripts, fsmTests},
		from: "if s.load()+fresh > MaxHoldsPerSession {",
		to:   "if s.load()+fresh > MaxHoldsPerSession+1 {",
	},
	{
		name: "liveness/stranger-keepalive-admitted", file: "internal/liveness/tracker.go", checks: []check{livenessTests, strangerTests},
		from: "\tif err == nil && !s.secret.Admits(shown) {\n\t\treturn ErrSecretMismatch\n\t}\n\tif err != nil || perSecond <= 0 {",
		to:   "\tif err != nil || perSecond <= 0 {",
	},
	{
		name: "liveness/stranger-renewal-admitted", file: "internal/liveness/tracker.go", checks: []check{livenessTests, strangerTests},
		from: "if s := t.sessions[session]; s != nil && !s.secret.Admits(shown) {",
		to:   "if s := t.sessions[session]; s != nil && false {",
	},

	// The fence kit: a stale holder is refused by the Guard, the
	// middleware and the database; a signed token verifies only with a
	// live key of the cluster.
	{
		name: "fence/stale-token-admitted", file: "fence/guard.go", checks: []check{fenceTests},
		from: "\tcase token < e.seen:\n",
		to:   "\tcase token+1 < e.seen:\n",
	},
	{
		name: "fence/forgotten-resource-ignores-floor", file: "fence/guard.go", checks: []check{fenceTests},
		from: "\tcase e == nil && token < g.floor:\n",
		to:   "\tcase false:\n",
	},
	{
		name: "fence/forgetting-raises-no-floor", file: "fence/guard.go", checks: []check{fenceTests},
		from: "g.floor = max(g.floor, e.seen)",
		to:   "_ = e.seen",
	},
	{
		name: "fence/waiter-writes-after-newer-holder", file: "fence/guard.go", checks: []check{fenceTests},
		from: "\tif token < seen {\n",
		to:   "\tif false {\n",
	},
	{
		name: "fence/signature-not-verified", file: "fence/signed.go", checks: []check{fenceTests},
		from: "if len(k.Public) != ed25519.PublicKeySize || !ed25519.Verify(k.Public, signed, sig) {",
		to:   "if len(k.Public) != ed25519.PublicKeySize || !ed25519.Verify(k.Public, signed, sig) && false {",
	},
	{
		name: "fence/retired-key-verifies", file: "fence/signed.go", checks: []check{fenceTests},
		from: "if !k.NotAfter.IsZero() && !now.Before(k.NotAfter) {",
		to:   "if false {",
	},
	{
		name: "fence/retired-key-verifies-at-its-end", file: "fence/signed.go", checks: []check{fenceTests},
		from: "if !k.NotAfter.IsZero() && !now.Before(k.NotAfter) {",
		to:   "if !k.NotAfter.IsZero() && now.After(k.NotAfter) {",
	},
	{
		name: "fence/signed-middleware-takes-plain-headers", file: "fence/http.go", checks: []check{fenceTests},
		from: "\t\tcase len(vs) == 0:\n\t\t\treturn r, Claim{}, false, 0, nil\n",
		to:   "\t\tcase len(vs) == 0:\n\t\t\tc, ok, _ := ParseClaim(r.Header.Values(LockHeader), r.Header.Values(TokenHeader))\n\t\t\treturn r, c, ok, 0, nil\n",
	},
	{
		name: "fence/signed-middleware-ignores-lock-header", file: "fence/http.go", checks: []check{fenceTests},
		from: "err != nil || len(ls) > 1 || l != sc.Lock {",
		to:   "err != nil || len(ls) > 1 || l != sc.Lock && false {",
	},
	{
		name: "fence/middleware-serves-unfenced-when-refusing", file: "fence/http.go", checks: []check{fenceTests},
		from: "\t\t\tcase !ok && unfenced == RefuseUnfenced:\n",
		to:   "\t\t\tcase false:\n",
	},
	{
		name: "fence/grpc-serves-unfenced-when-refusing", file: "fence/fencegrpc/fencegrpc.go", checks: []check{fenceTests},
		from: "\tcase !ok && unfenced == fence.RefuseUnfenced:\n",
		to:   "\tcase false:\n",
	},
	{
		name: "fence/claim-of-token-zero", file: "fence/claim.go", checks: []check{fenceTests},
		from: "if err != nil || tok == 0 || tok > math.MaxInt64 {",
		to:   "if err != nil || tok > math.MaxInt64 {",
	},
	{
		name: "fence/sql-postgres-fence-not-compared", file: "fence/sql.go", checks: []check{fenceTests},
		from: "\" WHERE (\" + u.Where + \") AND \" + col + \" <= \" + p",
		to:   "\" WHERE (\" + u.Where + \") AND \" + col + \" <= \" + p + \" OR TRUE\"",
	},
	{
		name: "fence/sql-mysql-fence-not-compared", file: "fence/sql.go", checks: []check{fenceTests},
		from: "\" WHERE (\" + u.Where + \") AND \" + col + \" <= ?\"",
		to:   "\" WHERE (\" + u.Where + \") AND (\" + col + \" <= ? OR TRUE)\"",
	},
	{
		name: "fence/sql-token-zero-written", file: "fence/sql.go", checks: []check{fenceTests},
		from: "if token == 0 || token > math.MaxInt64 {",
		to:   "if token > math.MaxInt64 {",
	},
	{
		name: "fence/sql-refused-update-reported-applied", file: "fence/sql.go", checks: []check{fenceTests},
		from: "\treturn n > 0, nil\n",
		to:   "\treturn n >= 0, nil\n",
	},
	{
		name: "fence/pgx-refused-update-reported-applied", file: "fence/fencepgx/fencepgx.go", checks: []check{fenceTests},
		from: "return tag.RowsAffected() > 0, nil",
		to:   "return tag.RowsAffected() >= 0, nil",
	},

	// Members prove who they are: over TLS a peer's verified certificate
	// must name the member it claims to be, or the member dialled.
	{
		name: "transport/inbound-claim-not-checked", file: "internal/transport/server.go", checks: []check{transportTests},
		from: "if t.cfg.TLS != nil && !t.isRemoved(from) {",
		to:   "if false && !t.isRemoved(from) {",
	},
	{
		name: "transport/dialled-peer-not-checked", file: "internal/transport/sender.go", checks: []check{transportTests},
		from: "if names := certNames(tc.ConnectionState()); !namesMember(names, name) {",
		to:   "if names := certNames(tc.ConnectionState()); false {",
	},
	{
		name: "transport/claim-of-an-unknown-member-accepted", file: "internal/transport/identity.go", checks: []check{transportTests},
		from: "\tif ok && namesMember(names, name) {\n",
		to:   "\tif !ok || namesMember(names, name) {\n",
	},
	{
		name: "transport/unverified-certificate-names-a-member", file: "internal/transport/identity.go", checks: []check{transportTests},
		from: "\tif len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {\n\t\treturn nil\n\t}\n\treturn leafNames(cs.VerifiedChains[0][0])",
		to:   "\tif len(cs.PeerCertificates) == 0 {\n\t\treturn nil\n\t}\n\treturn leafNames(cs.PeerCertificates[0])",
	},
}
