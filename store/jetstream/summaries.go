package jetstream

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/nats-io/nats.go/jetstream"
)

// The summaries' bucket keeps one message per key (History 1): the
// session's last summary. Listing them reads the bucket's stream with the
// batched direct gets a journal is read with (load.go): a request for
// each 256, and no consumer. The bucket's key listing made an ordered
// consumer and then a get per key: 2 ms for a browser's 20 chats, and a
// request per session for the list of all that the engine reads as it
// starts and at each retention sweep.

// summaryKey is a summary's key: the owner first, so a browser's sessions
// are one filter.
func summaryKey(owner, session string) string {
	return ownerToken(owner) + "." + session
}

// ownerToken is owner as one token of a subject: as it is when it is made
// of letters, digits, - and _ (the gateway's cookie ids), "_" for none,
// else "=" and its base64url. An owner an app's login names (the
// gateway's Options.Identify: an email, a name with a space) could hold a
// "." (alice@example.com filed under alice@example), a "*" or a ">"
// (matching everyone's), or a space (a subject the server refuses).
func ownerToken(owner string) string {
	switch {
	case owner == "":
		return "_"
	case owner != "_" && plainToken(owner):
		return owner
	default:
		return "=" + base64.RawURLEncoding.EncodeToString([]byte(owner))
	}
}

// plainToken reports whether s is made of letters, digits, - and _ only.
func plainToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Summarize implements engine.Store.
func (s *Store) Summarize(ctx context.Context, sum engine.Summary) error {
	// A node whose lease may have lapsed must not write over the summary
	// of the node that runs the session now, as it must not append.
	if err := s.holds(sum.ID); err != nil {
		return err
	}
	// As the bucket's Put, without the client's decoding of the answer or
	// encoding/json's reflection (two writes a turn), into a buffer with
	// room for the usual summary: its names, two times and the keys.
	data, err := engine.AppendSummary(make([]byte, 0, 192+len(sum.ID)+len(sum.Owner)+len(sum.Title)), sum)
	if err != nil {
		return err
	}
	if err := s.put(ctx, summarySubject+summaryKey(sum.Owner, sum.ID), data); err != nil {
		return fmt.Errorf("failed to store session %s's summary: %w", sum.ID, err)
	}
	return nil
}

// summarySubject is the subjects' prefix of the summaries' bucket: a
// key's Put publishes on it (the bucket has no mirror and the client no
// domain).
const summarySubject = "$KV." + SummaryBucket + "."

// summaryStreamName is the stream of the summaries' bucket.
const summaryStreamName = "KV_" + SummaryBucket

// Summaries implements engine.Store.
func (s *Store) Summaries(ctx context.Context, owner string) ([]engine.Summary, error) {
	filter := ">"
	if owner != "" {
		filter = summaryKey(owner, ">")
	}
	// Every message of the bucket's stream is a summary: with no subject,
	// the server counts what a batch leaves from the stream's state, where
	// a filter of every subject walks them all, each batch (10,000
	// summaries: 240 ms in 256s, against 20).
	subjects := ""
	if owner != "" {
		subjects = summarySubject + filter
	}
	out, err := readDirect(s,
		func() ([]engine.Summary, error) {
			sums, _, err := s.readSummaries(ctx, subjects, 0)
			return sums, err
		},
		func() ([]engine.Summary, error) { return s.summariesByKey(ctx, filter) })
	if err != nil {
		return nil, err
	}
	engine.SortSummaries(out)
	return out, nil
}

var _ engine.SummaryFeed = (*Store)(nil)

// SummariesChanged implements engine.SummaryFeed. The bucket keeps a key's
// last summary only (History 1), and each write takes a stream sequence
// after every one before it: the messages after the cursor, a stream
// sequence, are the summaries written since it, as last written.
//
// The stream's end says how many may have changed: a few are read a direct
// get each (a request each: a network round trip to a remote server), more
// than feedGets in batches, as a whole read is (a batch costs the server a
// walk of every key, 3 ms at 10,000). An end before the cursor is a stream
// begun again (the bucket was lost): every summary is read.
func (s *Store) SummariesChanged(ctx context.Context, cursor uint64) (engine.Changes, error) {
	whole := cursor == 0
	if !whole {
		info, err := s.summaryStream.Info(ctx)
		if err != nil {
			return engine.Changes{Cursor: cursor}, fmt.Errorf("failed to read the session summaries' stream: %w", err)
		}
		switch last := info.State.LastSeq; {
		case last < cursor:
			whole, cursor = true, 0 // the stream begun again
		case last-cursor <= feedGets:
			sums, at, err := s.summariesAfter(ctx, cursor)
			return engine.Changes{Summaries: sums, Cursor: at}, err
		}
	}
	// Many, or all: in batches, or, from a server that knows no batched
	// get, a get each, or by key.
	return readDirect(s,
		func() (engine.Changes, error) {
			sums, at, err := s.readSummaries(ctx, "", cursor)
			return engine.Changes{Summaries: sums, Cursor: at, Whole: whole}, err
		},
		func() (engine.Changes, error) {
			if !whole {
				sums, at, err := s.summariesAfter(ctx, cursor)
				return engine.Changes{Summaries: sums, Cursor: at}, err
			}
			// The stream's end before the listing: a summary written
			// meanwhile may come twice, the second time as last written.
			info, err := s.summaryStream.Info(ctx)
			if err != nil {
				return engine.Changes{}, fmt.Errorf("failed to list session summaries: %w", err)
			}
			sums, err := s.summariesByKey(ctx, ">")
			return engine.Changes{Summaries: sums, Cursor: info.State.LastSeq, Whole: true}, err
		})
}

// feedGets is the most summaries SummariesChanged reads a direct get each.
const feedGets = 64

// summariesAfter reads the summaries after stream sequence after, a direct
// get each (the next message from a sequence), and returns them with the
// sequence of the last; on an error, those it read before it, and its
// sequence. A batched get would count first what it leaves, which on a
// stream of one message a subject walks every subject it has: 3 ms at
// 10,000 sessions, each batch, where a look reads a few.
func (s *Store) summariesAfter(ctx context.Context, after uint64) ([]engine.Summary, uint64, error) {
	var out []engine.Summary
	for {
		msg, err := s.summaryStream.GetMsg(ctx, after+1, jetstream.WithGetMsgSubject(">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, after, nil
		}
		if err != nil {
			return out, after, fmt.Errorf("failed to read the session summaries written after stream sequence %d of %s: %w", after, summaryStreamName, err)
		}
		after = msg.Sequence
		if len(msg.Data) == 0 {
			continue // an earlier version's delete marker
		}
		var sum engine.Summary
		if err := json.Unmarshal(msg.Data, &sum); err != nil {
			s.summaryUnreadable(fmt.Sprintf("the message at stream sequence %d of %s", after, summaryStreamName), err)
			continue
		}
		out = append(out, sum)
	}
}

// readSummaries reads every summary on the subjects filter ("": all) after
// stream sequence after (0: from the stream's start) until a batch finds
// nothing more (404), and returns them with the stream sequence of the
// last it read (after, when none). A key's delete marker, which gateways
// before this one left, has no payload.
func (s *Store) readSummaries(ctx context.Context, filter string, after uint64) ([]engine.Summary, uint64, error) {
	answers, err := s.subscribeAnswers()
	if err != nil {
		return nil, after, err
	}
	defer answers.stop()
	var out []engine.Summary
	r := directReader{next: after + 1}
	r.take = func(data []byte) error {
		if len(data) == 0 {
			return nil
		}
		var sum engine.Summary
		if err := json.Unmarshal(data, &sum); err != nil {
			s.summaryUnreadable(fmt.Sprintf("a message at or after stream sequence %d of %s", r.next, summaryStreamName), err)
			return nil
		}
		out = append(out, sum)
		return nil
	}
	var retry replicaRetry
	for {
		end, err := answers.batch(ctx, summaryStreamName, filter, &r)
		if err != nil {
			return nil, after, fmt.Errorf("failed to list session summaries: %w", err)
		}
		switch {
		case end.sent:
			retry = replicaRetry{} // there may be more: at once
		case strings.HasPrefix(end.status, "404"):
			return out, r.next - 1, nil
		case !retry.again(ctx):
			if err := ctx.Err(); err != nil {
				return nil, after, err
			}
			return nil, after, fmt.Errorf("%w: the session summaries (the last answer: %s)", errNoDirectAnswer, end.status)
		}
	}
}

// summariesByKey lists the summaries with the bucket's keys and a get per
// key: for a server that knows no batched direct get.
func (s *Store) summariesByKey(ctx context.Context, filter string) ([]engine.Summary, error) {
	keys, err := s.summaries.ListKeysFiltered(ctx, filter)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to list session summaries: %w", err)
	}
	// The lister's goroutine sends each key with no way out but a reader:
	// read them all before a Get may fail and return (cookies.go does too).
	var names []string
	for k := range keys.Keys() {
		names = append(names, k)
	}
	var out []engine.Summary
	for _, k := range names {
		e, err := s.summaries.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("failed to read a session summary: %w", err)
		}
		var sum engine.Summary
		if err := json.Unmarshal(e.Value(), &sum); err != nil {
			s.summaryUnreadable("the key "+k, err)
			continue
		}
		out = append(out, sum)
	}
	return out, nil
}

// summaryUnreadable says that a summary that does not decode was left out
// of a listing, at most once a minute (a browser lists its chats at will).
// A summary is the list's copy of what the journal says: one damaged
// summary must not keep every other chat from the list, nor the gateway
// from starting (Resume lists them all); the session's next step writes it
// again.
func (s *Store) summaryUnreadable(which string, err error) {
	s.summaryWarned.Do(func() {
		s.opts.Logger.Error("a session summary cannot be read: the list of chats leaves it out until its session's next step writes it again (a damaged disk? docs/storage.md)",
			"bucket", SummaryBucket, "summary", which, "err", err)
	})
}

var _ engine.JournalList = (*Store)(nil)

// Journals lists the sessions that have a journal (engine.JournalList):
// the subjects of the journal stream, read in pages by the client.
func (s *Store) Journals(ctx context.Context) ([]string, error) {
	info, err := s.journal.Info(ctx, jetstream.WithSubjectFilter(journalPrefix+">"))
	if err != nil {
		return nil, fmt.Errorf("failed to list the journals: %w", err)
	}
	ids := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		ids = append(ids, strings.TrimPrefix(subj, journalPrefix))
	}
	return ids, nil
}

// JournalUpdated is when session's journal was last appended to: its last
// message's time, which the server gave it (engine.JournalList).
func (s *Store) JournalUpdated(ctx context.Context, session string) (time.Time, error) {
	if !validID(session) {
		return time.Time{}, engine.ErrNoSession
	}
	msg, err := s.journal.GetLastMsgForSubject(ctx, subject(session))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return time.Time{}, engine.ErrNoSession
	case err != nil:
		return time.Time{}, fmt.Errorf("failed to read session %s's journal: %w", session, err)
	}
	return msg.Time, nil
}

// markersPurged, in the summaries stream's metadata, says the delete
// markers that gateways before this one left in the bucket (one per
// deleted session, each a subject the server indexes) were removed.
const markersPurged = "gateway.markers-purged"

// purgeOldMarkers removes those markers once, from a bucket an earlier
// version made; the gateway starts without it if that fails (the markers
// cost the server some memory, nothing else), and tries again at its next
// start.
func (s *Store) purgeOldMarkers(ctx context.Context) error {
	cfg := s.summaryStream.CachedInfo().Config
	if cfg.Metadata[markersPurged] == "true" {
		return nil
	}
	if err := s.summaries.PurgeDeletes(ctx, jetstream.DeleteMarkersOlderThan(-1)); err != nil {
		return fmt.Errorf("failed to remove the deleted sessions' markers: %w", err)
	}
	if err := s.markStream(ctx, cfg, markersPurged, "true"); err != nil {
		return fmt.Errorf("failed to mark the deleted sessions' markers removed: %w", err)
	}
	return nil
}

// markStream sets a metadata entry of the stream whose configuration is
// cfg, leaving the rest of it as it is.
func (s *Store) markStream(ctx context.Context, cfg jetstream.StreamConfig, key, value string) error {
	cfg.Metadata = maps.Clone(cfg.Metadata)
	if cfg.Metadata == nil {
		cfg.Metadata = map[string]string{}
	}
	cfg.Metadata[key] = value
	return s.updateStream(ctx, cfg)
}
