// Package e2e holds Baton's end-to-end tests, on real sockets: most run
// `baton server` processes, started from a binary built once per test
// run, and talk to them through the generated gRPC client (api/batonpb).
//
//   - TestChaos runs three members on 127.0.0.1 under a client load that
//     writes through fencing tokens to an in-test resource, while a loop
//     kill -9s and restarts members (the leader included); it then checks
//     the safety properties of docs/ARCHITECTURE.md against the clients' history, the final cluster
//     state and the replayed Raft logs of all three members.
//   - TestPartition runs three members in their own network namespaces
//     joined by veth pairs and cuts and heals links (both ways, one way,
//     leader isolated). It needs root and `ip netns`; it skips, saying why,
//     where those are missing.
//   - TestLibraryChaos, the TLS, dashboard and stranger tests run members
//     in the test's process (embed/embedtest) and drive them through the
//     Go client: the library under member restarts, TLS and operators
//     end to end, the dashboard's fields and feed, the API's refusals of a
//     caller without a session's secret.
//   - TestDashboardInBrowser drives the dashboard in a headless Debian
//     chromium through chromedp: it sees a holder and its waiters,
//     blacklists the holder from the page and sees the lock pass on, and
//     follows the member through a restart. Without chromium it skips
//     (fails under BATON_TEST_STRICT=1). With -e2e.dashboard-screenshot=FILE
//     it also runs a short workload for the charts and writes the
//     screenshot README shows (docs/dashboard.png).
//
// Every test here listens on real ports and skips under -short. Flags:
// -chaos.duration, -chaos.clients, -chaos.locks, -chaos.seed,
// -lib.chaos-duration, -lib.chaos-seed, -e2e.keep,
// -e2e.dashboard-screenshot.
package e2e
