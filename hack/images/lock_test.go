package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWaitLockIsBounded: a make images waiting for another one gives up after its limit,
// saying so, and takes the lock as soon as the other lets go.
func TestWaitLockIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".lock")
	holder, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	must(t, err)
	defer holder.Close()
	must(t, syscall.Flock(int(holder.Fd()), syscall.LOCK_EX))
	waiter, err := os.OpenFile(path, os.O_RDWR, 0o644)
	must(t, err)
	defer waiter.Close()

	start := time.Now()
	err = waitLock(context.Background(), waiter, 1500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "held") {
		t.Fatalf("waitLock while another holds the lock: %v, want an error saying it is held", err)
	}
	if took := time.Since(start); took < time.Second || took > 10*time.Second {
		t.Errorf("gave up after %s, want about 1.5 s", took)
	}

	go func() {
		time.Sleep(500 * time.Millisecond)
		_ = syscall.Flock(int(holder.Fd()), syscall.LOCK_UN)
	}()
	must(t, waitLock(context.Background(), waiter, time.Minute))
}
