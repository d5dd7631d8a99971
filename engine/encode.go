package engine

import (
	"bytes"
	"encoding/json"
	"sync"
)

// jsonBuf is a buffer with its encoder, for withJSON.
type jsonBuf struct {
	b   bytes.Buffer
	enc *json.Encoder
}

var jsonBufs = sync.Pool{New: func() any {
	j := &jsonBuf{}
	j.enc = json.NewEncoder(&j.b)
	return j
}}

// maxPooledJSON is the largest buffer withJSON keeps for the next use.
const maxPooledJSON = 64 << 10

// withJSON encodes v as json.Marshal does (the encoder escapes HTML as
// Marshal does) into a pooled buffer and calls f with the bytes, which are
// valid only during f: a frame is built from them with one allocation,
// instead of Marshal's result and then the frame.
func withJSON(v any, f func(body []byte)) error {
	j := jsonBufs.Get().(*jsonBuf)
	j.b.Reset()
	err := j.enc.Encode(v)
	if err == nil {
		body := j.b.Bytes()
		f(body[:len(body)-1]) // Encode ends with a newline
	}
	if j.b.Cap() <= maxPooledJSON {
		jsonBufs.Put(j)
	}
	return err
}
