package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, a second one ends the process at once, with
	// the signal's exit status: an operator who presses Ctrl-C twice means
	// it. Exiting here, not putting the signal's disposition back, holds
	// for a process that started with SIGINT ignored too (a script's
	// background job), where that disposition is to ignore it.
	second := make(chan os.Signal, 2)
	signal.Notify(second, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		<-second // the first, which ctx had too
		sig := <-second
		code := 130 // SIGINT's
		if sig == syscall.SIGTERM {
			code = 143
		}
		os.Exit(code)
	}()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // -h: the usage is printed
		}
		if errors.Is(err, errInterrupted) {
			fmt.Fprintln(os.Stderr, "gateway:", err)
			return
		}
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}
