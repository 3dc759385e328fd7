package registrycreds

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker-credential-helpers/credentials"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHelperGet(t *testing.T) {
	tests := []struct {
		name             string
		files            map[string]string
		wantUser, wantPw string
		wantErr          string
	}{
		{name: "no Secret mounted: anonymous", files: nil},
		{name: "username and password", files: map[string]string{"username": "puller\n", "password": "s3cret with space\n"},
			wantUser: "puller", wantPw: "s3cret with space"},
		{name: "username without password", files: map[string]string{"username": "puller"}, wantErr: "no readable password"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for k, v := range tt.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600))
			}
			user, pw, err := Helper{Dir: dir}.Get("https://upstream.example:5000")
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantUser, user)
			assert.Equal(t, tt.wantPw, pw)
		})
	}
}

// TestHelperProtocol runs the docker-credential-helpers protocol the registry speaks: a
// changed Secret file is what the next `get` answers.
func TestHelperProtocol(t *testing.T) {
	dir := t.TempDir()
	h := Helper{Dir: dir}
	get := func() credentials.Credentials {
		var out bytes.Buffer
		require.NoError(t, credentials.HandleCommand(h, "get", strings.NewReader("https://upstream.example\n"), &out))
		var c credentials.Credentials
		require.NoError(t, json.Unmarshal(out.Bytes(), &c))
		return c
	}
	assert.Equal(t, "", get().Username)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "username"), []byte("first"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "password"), []byte("one"), 0o600))
	assert.Equal(t, credentials.Credentials{ServerURL: "https://upstream.example", Username: "first", Secret: "one"}, get())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "password"), []byte("two"), 0o600))
	assert.Equal(t, "two", get().Secret, "a rotated Secret takes effect at the next call")
	assert.Error(t, credentials.HandleCommand(h, "store", strings.NewReader(`{"ServerURL":"x","Username":"u","Secret":"s"}`), &bytes.Buffer{}))
}

func TestInstall(t *testing.T) {
	dir := t.TempDir()
	dest, err := Install(dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, HelperName), dest)
	st, err := os.Stat(dest)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o555), st.Mode().Perm())
	self, _ := os.Executable()
	selfSt, _ := os.Stat(self)
	assert.Equal(t, selfSt.Size(), st.Size())
	assert.True(t, IsHelper(dest))
	assert.False(t, IsHelper("/manager"))
}
