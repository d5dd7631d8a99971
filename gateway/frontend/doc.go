// Package frontend holds what the HTTP front ends (gateway/aisdk,
// gateway/agui) share: the options of a stream (Options, its defaults),
// the loop that drives a response from a session's engine.Page (Pump,
// which hands each frame to the adapter's Stream and decides when the
// response ends), the pending-call rule (Calls: the response waits only on
// client calls this stream delivered, or on sub-agents waiting on them;
// Calls.See also leaves a sub-agent's text and worker calls out), the
// answer to a call (Answer), a user message sent again (FindSent: the
// same messages posted twice are one message), a new one until the session
// takes it (Sending: a session.idle before then is not its answer's end)
// and the refusal of a request before its stream
// starts (Status, BadRequest, DecodeJSON). What a frame means on the wire
// stays in the adapter.
//
// Concurrency: none of it is safe for concurrent use. A Pump, its Stream
// and its Calls belong to the request's goroutine, which runs Pump.Run
// until the response ends or the request's context does.
package frontend
