package engine

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
