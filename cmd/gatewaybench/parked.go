package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/clienttools/gateway/runners"
	"golang.org/x/sync/errgroup"
)

// parkedPhase: the memory and goroutines of an idle session with no page.
// Sessions are opened, their pages leave, and the gateway (with Unload
// parkedUnload) takes them out of memory; what stays per session is read
// as in the idle phase: before and after, after a GC and FreeOSMemory, and
// on JetStream once the store's caches of the last writes have expired
// (storeCacheExpiry). Then as many again: the second batch's sessions
// are loaded into the heap the first one's peak left, so what each adds
// is what one more parked session costs a gateway that has been running,
// without the heap's growth from a fresh process that the first pays.
func parkedPhase(ctx context.Context, cfg config, r report, res *results, stderr io.Writer) error {
	if cfg.url != "" {
		r.printf("parked: not run against -url (it needs a gateway started with -unload)")
		return nil
	}
	cfg.unload = parkedUnload
	cfg.memProfile = perStore(cfg.memProfile, "parked")
	r.printf("parked: %d sessions opened (after %d warm), %d a browser; each page leaves at once and the gateway unloads its session after %s",
		cfg.parked, idleWarm, parkedPerBrowser, parkedUnload)
	var per, more perConn
	var g0, g1 int
	_, err := withTarget(ctx, cfg, serveGateway, stderr, func(t *target, d *dialer) (*recorder, error) {
		settle := func(n int) (procStats, error) {
			if err := park(ctx, d, n, cfg.parallel); err != nil {
				return procStats{}, err
			}
			d.close() // the GET / connections, and their goroutines in the gateway
			if err := waitUnloaded(ctx, t); err != nil {
				return procStats{}, err
			}
			// Let the last goroutines exit (the gateway's free runners,
			// package runners, end after their idle time) and the store's
			// caches of the last writes expire.
			wait := runners.DefaultIdle + 500*time.Millisecond
			if cfg.store == "jetstream" {
				wait = max(wait, storeCacheExpiry)
			}
			time.Sleep(wait)
			return t.stats(ctx, true)
		}
		s0, err := settle(idleWarm)
		if err != nil {
			return nil, err
		}
		s1, err := settle(cfg.parked)
		if err != nil {
			return nil, err
		}
		s2, err := settle(cfg.parked)
		if err != nil {
			return nil, err
		}
		per, more, g0, g1 = perConnection(s0, s1, cfg.parked), perConnection(s1, s2, cfg.parked), s0.Goroutines, s2.Goroutines
		if cfg.memProfile != "" {
			if err := t.control(ctx, "/bench/heapprofile"); err != nil {
				return nil, err
			}
			r.printf("  heap profile of the gateway with %d sessions unloaded: %s", 2*cfg.parked+idleWarm, cfg.memProfile)
		}
		return nil, nil
	})
	if err != nil {
		return err
	}
	res.parked, res.parkedMore, res.parkedSessions = per, more, cfg.parked
	r.printf("  %-36s %10s %10s %10s %10s %10s", "", "RSS", "HeapInuse", "HeapAlloc", "StackInuse", "goroutines")
	r.printf("  %-36s %10s %10s %10s %10s %10.3f", "gateway, per session unloaded", fmtBytes(per.rss), fmtBytes(per.heap), fmtBytes(per.live), fmtBytes(per.stack), per.goroutines)
	r.printf("  %-36s %10s %10s %10s %10s %10.3f", "  the same for a second batch", fmtBytes(more.rss), fmtBytes(more.heap), fmtBytes(more.live), fmtBytes(more.stack), more.goroutines)
	r.printf("  goroutines in the gateway: %d after the warm sessions unloaded, %d after both batches", g0, g1)
	if res.store == "memory" {
		r.printf("  (the memory store keeps every session's journal in the gateway's heap: that is most of what stays)")
	}
	return nil
}

// park opens n sessions, parkedPerBrowser to a browser, and closes each
// page once session.opened arrived.
func park(ctx context.Context, d *dialer, n, parallel int) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i := 0; i < n; i += parkedPerBrowser {
		k := min(parkedPerBrowser, n-i)
		g.Go(func() error {
			hdr, err := d.cookie(gctx)
			if err != nil {
				return err
			}
			for range k {
				b, err := d.openSessionAs(gctx, hdr)
				if err != nil {
					return err
				}
				b.close()
			}
			return nil
		})
	}
	return g.Wait()
}

// waitUnloaded waits until the gateway holds no session in memory, for up
// to two minutes.
func waitUnloaded(ctx context.Context, t *target) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		st, err := t.stats(ctx, false)
		if err == nil && st.Sessions == 0 {
			return nil
		}
		if err == nil && st.Sessions < 0 {
			return errors.New("the gateway does not count its sessions in /bench/stats")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the gateway still holds %d sessions: %w", st.Sessions, errors.Join(err, ctx.Err()))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
