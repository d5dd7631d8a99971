package engine

import "context"

// What tests outside the package look at to line up a race instead of
// sleeping.

// Waiting is how many messages wait in the session's inbox, behind the one
// that runs.
func (s *Session) Waiting() int {
	s.mail.mu.Lock()
	defer s.mail.mu.Unlock()
	return len(s.mail.queue) - s.mail.head
}

// ReplayReadJoined is how many callers wait on the journal read under way
// for a replay besides the one that reads; 0 when none is under way.
func (s *Session) ReplayReadJoined() int {
	s.readingMu.Lock()
	defer s.readingMu.Unlock()
	if s.reading == nil {
		return 0
	}
	return s.reading.joined
}

// InStep runs f as one step of the session's, on its goroutine.
func (s *Session) InStep(ctx context.Context, f func()) error {
	return s.do(ctx, func() error { f(); return nil })
}

// ProgressInStep takes a page's progress report in the step under way
// (InStep's f).
func (s *Session) ProgressInStep(pr ToolProgress) error { return s.progress(pr, HandlerClient) }
