// Package lockers implements bench.Locker for the systems Baton is
// compared with: etcd, ZooKeeper, Redis and PostgreSQL.
package lockers
