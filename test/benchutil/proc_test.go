package benchutil

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProcStatus(t *testing.T) {
	pid := os.Getpid()
	rss, err := ProcRSS(pid)
	require.NoError(t, err)
	assert.Positive(t, rss, "this test's own VmRSS")

	anon, err := ProcStatus(pid, "RssAnon")
	require.NoError(t, err)
	file, err := ProcStatus(pid, "RssFile")
	require.NoError(t, err)
	assert.Positive(t, anon)
	assert.Positive(t, file, "the test binary's mapped pages")
	assert.LessOrEqual(t, anon+file, rss+1<<20, "VmRSS is RssAnon + RssFile + RssShmem, read a moment apart")

	_, err = ProcStatus(pid, "NoSuchField")
	assert.ErrorContains(t, err, "no NoSuchField in /proc/")
	_, err = ProcStatus(-1, "VmRSS")
	assert.Error(t, err, "no such process")
}
