package fakeapi

import (
	"context"
	"testing"

	"github.com/clienttools/gateway/engine/model"
)

// Request is a streamed one-message turn ("hi") for modelID.
func Request(modelID string) model.Request {
	return model.Request{
		Model:    modelID,
		Stream:   true,
		Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}},
	}
}

// Generate runs one turn of m and collects the deltas.
func Generate(t testing.TB, m model.Model, req model.Request) (model.Response, []string, error) {
	t.Helper()
	var deltas []string
	resp, err := m.Generate(context.Background(), req, func(s string) { deltas = append(deltas, s) })
	return resp, deltas, err
}
