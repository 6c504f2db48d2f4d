// A producer in Go (database/sql with github.com/go-sql-driver/mysql) that
// follows docs/producers.md: the order row and its outbox_event row in one
// transaction, an honest outcome, and an UNKNOWN commit reconciled by
// (tenant_id, request_id), never replayed blindly.
//
//	PRODUCER_MYSQL_URL=mysql://user:pass@host:port/db \
//	    order-producer-go [-count N] [-tenant T] [-prefix P]
//
// One JSON line per request on stdout:
//
//	{"request_id", "event_id", "order_id", "outcome", "attempts", "reconciled", "discarded"}
//
// outcome: committed | already_accepted | failed. Exit 0 when every request
// ended accepted.
//
// Built offline against Debian's packages (golang-go,
// golang-github-go-sql-driver-mysql-dev), in GOPATH mode:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o order-producer-go main.go
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/go-sql-driver/mysql"
)

const maxAttempts = 8

// source and type of the event (docs/producers.md, "The outbox row"):
// aggregate_type a URI-reference of at most 64 characters, event_type at most
// 128 (it is the routing key).
const (
	aggregateType = "ORDER"
	eventType     = "ORDER_ACCEPTED"
)

type outcome int

const (
	committed  outcome = iota // COMMIT returned success
	rolledBack                // a statement failed and the ROLLBACK answered
	unknown                   // COMMIT or ROLLBACK failed: it may have committed
)

// uuid7 is an RFC 9562 UUIDv7: 48 bits of Unix time in ms, version 7, 74
// random bits with the variant 10, lowercase.
func uuid7() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	ms := uint64(time.Now().UnixMilli())
	for i := 0; i < 6; i++ {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = 0x70 | (b[6] & 0x0f)
	b[8] = 0x80 | (b[8] & 0x3f)
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// dsn turns mysql://user:pass@host:port/db into the driver's form, with
// the session in UTC and every wait bounded.
func dsn(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "mysql" {
		return "", fmt.Errorf("PRODUCER_MYSQL_URL must be mysql://user:pass@host:port/db")
	}
	c := mysql.NewConfig()
	c.User = u.User.Username()
	c.Passwd, _ = u.User.Password()
	c.Net = "tcp"
	c.Addr = u.Host
	c.DBName = u.Path[1:]
	c.Loc = time.UTC
	c.Timeout = 5 * time.Second
	c.ReadTimeout = 10 * time.Second
	c.WriteTimeout = 10 * time.Second
	c.Params = map[string]string{"time_zone": "'+00:00'", "charset": "utf8mb4"}
	return c.FormatDSN(), nil
}

// discard takes a connection out of the pool for good: database/sql drops a
// connection whose Raw callback answers driver.ErrBadConn instead of
// handing it out again.
func discard(c *sql.Conn) {
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
	_ = c.Close()
}

func errCode(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// accept writes the order and its outbox row in one transaction on c.
func accept(ctx context.Context, c *sql.Conn, tenant, requestID, eventID string) (outcome, int64, uint16) {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return unknown, 0, errCode(err) // the session's state is not known
	}
	fail := func(err error) (outcome, int64, uint16) {
		if rbErr := tx.Rollback(); rbErr != nil {
			return unknown, 0, errCode(err)
		}
		return rolledBack, 0, errCode(err)
	}
	res, err := tx.ExecContext(ctx, "INSERT INTO orders (tenant_id, request_id, acceptance_event_id, version, "+
		"status, created_at) VALUES (?, ?, ?, 1, 'ACCEPTED', UTC_TIMESTAMP(6))", tenant, requestID, eventID)
	if err != nil {
		return fail(err)
	}
	orderID, err := res.LastInsertId()
	if err != nil {
		return fail(err)
	}
	payload, _ := json.Marshal(map[string]any{"orderId": orderID, "status": "ACCEPTED", "version": 1})
	_, err = tx.ExecContext(ctx, "INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, "+
		"event_version, payload, status, created_at) VALUES (?, ?, ?, ?, 1, ?, 'PENDING', UTC_TIMESTAMP(6))",
		eventID, aggregateType, fmt.Sprint(orderID), eventType, string(payload))
	if err != nil {
		return fail(err)
	}
	if err := tx.Commit(); err != nil {
		return unknown, 0, 0
	}
	return committed, orderID, 0
}

// reconcile finds the request's order on the primary with a locking read
// (the latest committed row; it waits for a first attempt still running).
func reconcile(ctx context.Context, db *sql.DB, tenant, requestID string) (bool, int64, string, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return false, 0, "", err
	}
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		discard(c)
		return false, 0, "", err
	}
	var id int64
	var stored string
	err = tx.QueryRowContext(ctx, "SELECT id, acceptance_event_id FROM orders WHERE tenant_id = ? "+
		"AND request_id = ? FOR UPDATE", tenant, requestID).Scan(&id, &stored)
	found := err == nil
	if errors.Is(err, sql.ErrNoRows) {
		err = nil
	}
	if err == nil {
		err = tx.Commit()
	} else {
		_ = tx.Rollback()
	}
	if err != nil {
		discard(c)
		return false, 0, "", err
	}
	c.Close()
	return found, id, stored, nil
}

type result struct {
	RequestID  string `json:"request_id"`
	EventID    string `json:"event_id"`
	OrderID    *int64 `json:"order_id"`
	Outcome    string `json:"outcome"`
	Attempts   int    `json:"attempts"`
	Reconciled int    `json:"reconciled"`
	Discarded  int    `json:"discarded"`
}

func submit(ctx context.Context, db *sql.DB, tenant, requestID, eventID string) result {
	r := result{RequestID: requestID, EventID: eventID, Outcome: "failed"}
	for r.Attempts < maxAttempts {
		r.Attempts++
		c, err := db.Conn(ctx)
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		oc, orderID, code := accept(ctx, c, tenant, requestID, eventID)
		switch oc {
		case committed:
			c.Close() // back to the pool
			r.OrderID, r.Outcome = &orderID, "committed"
			return r
		case rolledBack:
			c.Close()
			if code == 1213 || code == 1205 { // deadlock, lock wait: run it again
				time.Sleep(time.Duration(50*r.Attempts) * time.Millisecond)
				continue
			}
			if code != 1062 {
				return r // permanent: the same input fails the same way
			}
			// 1062 (uq_orders_tenant_request, or a racing attempt): reconcile.
		case unknown:
			discard(c)
			r.Discarded++
		}
		var found bool
		var id int64
		var stored string
		for i := 1; i <= 20; i++ {
			found, id, stored, err = reconcile(ctx, db, tenant, requestID)
			if err == nil {
				break
			}
			time.Sleep(time.Duration(200*i) * time.Millisecond)
		}
		r.Reconciled++
		if err != nil {
			return r
		}
		if found {
			r.OrderID, r.EventID = &id, stored
			if stored == eventID {
				r.Outcome = "committed"
			} else {
				r.Outcome = "already_accepted"
			}
			return r
		}
		// Not committed: try again with the same event id.
	}
	return r
}

func main() {
	count := flag.Int("count", 1, "requests")
	tenant := flag.String("tenant", "demo", "tenant_id")
	prefix := flag.String("prefix", "req", "request id prefix")
	flag.Parse()
	d, err := dsn(os.Getenv("PRODUCER_MYSQL_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "order-producer-go:", err)
		os.Exit(2)
	}
	db, err := sql.Open("mysql", d)
	if err != nil {
		fmt.Fprintln(os.Stderr, "order-producer-go:", err)
		os.Exit(2)
	}
	defer db.Close()
	db.SetMaxOpenConns(4)
	ctx := context.Background()
	allOK := true
	out := json.NewEncoder(os.Stdout)
	for i := 1; i <= *count; i++ {
		requestID := fmt.Sprintf("%s-%d", *prefix, i)
		// One event id per request, made before the first attempt and kept
		// for every retry of this request.
		r := submit(ctx, db, *tenant, requestID, uuid7())
		allOK = allOK && r.Outcome != "failed"
		_ = out.Encode(r)
	}
	if !allOK {
		os.Exit(1)
	}
}
