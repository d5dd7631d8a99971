package httpworker_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/httpworker"
)

// The worked example of docs/workers.md.
func ExampleSign() {
	body := `{"session":"s1","trigger":{"type":"session.start","session":"s1"},"proposed":{}}`
	fmt.Println(httpworker.Sign([]byte("example-secret"), 1767225600, []byte(body)))
	// Output: v1=9a336c65c3c3d9eba930b502d475021236d65ae4d42a3ebe856c7bd43b2df551
}

// A worker written in Go, served over HTTP: verify the signature, decode the
// request, answer a decision.
func ExampleVerify() {
	secret := []byte(os.Getenv("WORKER_SECRET"))
	worker := &engine.ToolWorker{Agent: engine.AgentConfig{Model: "claude-haiku-4-5-20251001"}}

	http.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<20))
		if err != nil {
			http.Error(w, `{"error":"body too large"}`, http.StatusRequestEntityTooLarge)
			return
		}
		if err := httpworker.Verify(secret, r, body, time.Now(), 0); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		var req engine.DecideRequest
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, `{"error":"not a decide request"}`, http.StatusBadRequest)
			return
		}
		d, err := worker.Decide(r.Context(), req)
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(d)
	})
	// log.Fatal(http.ListenAndServe("127.0.0.1:8787", nil))
}

// The gateway's side: an engine whose worker is reached over HTTP.
func ExampleNew() {
	w, err := httpworker.New(httpworker.Options{
		URL:    "http://127.0.0.1:8787/",
		Secret: []byte(os.Getenv("WORKER_SECRET")),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	_ = engine.Options{Worker: w} // plus Models, Client, ...
}
