package benchutil

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

func TestCountingProxyOpenWatches(t *testing.T) {
	release := make(chan struct{}) // the API server ends its watches
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		if r.URL.Query().Get("watch") == "" {
			return
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer api.Close()
	proxy := StartCountingProxy(t, &rest.Config{Host: api.URL})

	get := func(ctx context.Context, path, accept string) *http.Response {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, proxy.URL+path, nil)
		require.NoError(t, err)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return resp
	}
	held := func(want map[string]int) {
		t.Helper()
		assert.Eventually(t, func() bool { return assert.ObjectsAreEqual(want, proxy.OpenWatches()) }, 5*time.Second, 10*time.Millisecond,
			"want %v, have %v", want, proxy.OpenWatches())
	}

	list := get(context.Background(), "/api/v1/configmaps?limit=500", "")
	_ = list.Body.Close()
	held(nil)

	closedByClient, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := get(closedByClient, "/api/v1/configmaps?watch=true&labelSelector=app%3Dx&resourceVersion=1",
		"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
	defer first.Body.Close()
	second := get(context.Background(), "/api/v1/namespaces/a/secrets?watch=1", "")
	defer second.Body.Close()
	held(map[string]int{"/api/v1/configmaps?labelSelector=app%3Dx (metadata)": 1, "/api/v1/namespaces/a/secrets": 1})

	cancel()
	held(map[string]int{"/api/v1/namespaces/a/secrets": 1})
	close(release)
	held(map[string]int{})
	assert.Equal(t, 2, proxy.Calls.Total("WATCH"))
}

func TestIsReview(t *testing.T) {
	for res, want := range map[string]bool{
		"subjectaccessreviews": true, "tokenreviews": true, "localsubjectaccessreviews": true,
		"configmaps": false, "events": false, "chaosagents/status": false,
	} {
		assert.Equal(t, want, IsReview(res), res)
	}
}
