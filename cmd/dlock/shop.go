package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/sqllock"
)

// shop stands for the storage the demo's workers sell from: a SQLite file
// holding the stock, with the highest fencing token a write carried, in a
// sqllock.FenceTable. Each of its operations is one statement, atomic on
// its own; a purchase, which reads then writes, is only safe under a lock.
type shop struct {
	db    *sql.DB
	table *sqllock.FenceTable
}

const shopItem = "stock"

// errStale is the storage rejecting a write whose fencing token is older
// than one it has already seen: the writer lost its lock meanwhile.
var errStale = errors.New("write rejected: a newer lock holder has written since (stale fencing token)")

// openShop opens the shop in the SQLite file at path, in WAL mode as
// dlock's own SQLite store: the worker processes write it at once, and in
// the rollback-journal mode SQLite once failed one of them with "disk I/O
// error (5898)" (a journal deleted under it) while the machine was loaded.
// The demo's parent sets the mode when it creates the file, before the
// workers start.
func openShop(path string) (shop, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return shop{}, err
	}
	t, err := sqllock.NewFenceTable(db, sqllock.SQLite, "shop")
	if err != nil {
		db.Close()
		return shop{}, err
	}
	return shop{db: db, table: t}, nil
}

// newShop creates the shop at path with stock items.
func newShop(path string, stock int) (shop, error) {
	s, err := openShop(path)
	if err != nil {
		return s, err
	}
	ctx := context.Background()
	if err := s.table.Migrate(ctx); err != nil {
		s.close()
		return s, err
	}
	// Token 1: the lowest a lock hands out is higher.
	if err := s.table.Write(ctx, shopItem, 1, []byte(strconv.Itoa(stock))); err != nil {
		s.close()
		return s, err
	}
	return s, nil
}

func (s shop) close() error { return s.db.Close() }

// read returns the stock.
func (s shop) read() (int, error) {
	v, _, err := s.table.Read(context.Background(), shopItem)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return 0, fmt.Errorf("shop: stock %q: %w", v, err)
	}
	return n, nil
}

// write sets the stock. With fenced set, the write is fenced: storage
// refuses it if a higher token has written since. Without, it is a plain
// UPDATE, as storage that knows nothing of fencing would do.
func (s shop) write(stock int, token uint64, fenced bool) error {
	value := []byte(strconv.Itoa(stock))
	if !fenced {
		_, err := s.db.Exec(`UPDATE shop SET value = ? WHERE name = ?`, value, shopItem)
		return err
	}
	err := s.table.Write(context.Background(), shopItem, token, value)
	if errors.Is(err, fence.ErrStale) {
		return errStale
	}
	return err
}
