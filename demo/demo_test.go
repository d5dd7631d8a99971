package demo_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/clienttools/gateway/demo"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/engine/model/scripted"
)

// TestGetWeatherIsTheSeeds: the seed's forecasts and its error text.
func TestGetWeatherIsTheSeeds(t *testing.T) {
	tests := []struct {
		city, want, err string
	}{
		{"San Francisco", "It's foggy in San Francisco.", ""},
		{"Tokyo", "It's clear in Tokyo.", ""},
		{"Atlantis", "", "No forecast for Atlantis."},
	}
	for _, tt := range tests {
		args, _ := json.Marshal(map[string]string{"city": tt.city})
		got, err := demo.GetWeather.Exec(context.Background(), args)
		switch {
		case tt.err != "" && (err == nil || err.Error() != tt.err):
			t.Errorf("%s: error %v, want %q", tt.city, err, tt.err)
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("%s: %v, %v; want %q", tt.city, got, err, tt.want)
		}
	}
}

// TestDemoAgentOpens: every demo schema compiles and the demo script's
// model serves the agent, so `go run ./cmd/gateway` starts a chat.
func TestDemoAgentOpens(t *testing.T) {
	sm, err := scripted.New(scripted.Demo())
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Options{
		Worker: demo.Worker("scripted"),
		Models: model.ResolverFunc(func(string) (model.Model, error) { return sm, nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := e.Open(ctx, engine.OpenOptions{}); err != nil {
		t.Fatalf("the demo agent does not open: %v", err)
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
