package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// TestSessionIDsNoStoreTakes: a session.open naming an id that no session
// can have (a NATS wildcard, a dot, a space, or an id long enough that its
// subject passes NATS's 4 KiB request line) is unknown_session, as any
// unknown id, on the default store (embedded JetStream); and the gateway
// goes on serving: a 4 KiB id used to close the store's connection for
// good, every page answered 500 until a restart.
func TestSessionIDsNoStoreTakes(t *testing.T) {
	addr, _ := startGateway(t, nil, nil)
	client := browserClient(t)
	open := func(id string) (code, typ string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), hang)
		defer cancel()
		ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws", &websocket.DialOptions{HTTPClient: client})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		f := map[string]any{"type": "session.open"}
		if id != "" {
			f["session"] = id
		}
		b, _ := json.Marshal(f)
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
		_, b, err = ws.Read(ctx)
		if err != nil {
			t.Fatalf("session.open %.40q: %v", id, err)
		}
		var got struct{ Type, Code string }
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		return got.Code, got.Type
	}
	for _, id := range []string{"*", ">", "a.b", "a b", "..", "$G", "x.*", strings.Repeat("x", 129), strings.Repeat("x", 4100), strings.Repeat("x", 70000)} {
		if code, typ := open(id); code != "unknown_session" {
			t.Errorf("session.open with the id %.40q (%d bytes): %s %s, want error unknown_session", id, len(id), typ, code)
		}
	}
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"status":"ok"`) {
		t.Errorf("/healthz after those ids: %s %s", resp.Status, body)
	}
	if _, typ := open(""); typ != "session.opened" {
		t.Errorf("a new session after those ids: %s, want session.opened", typ)
	}
}
