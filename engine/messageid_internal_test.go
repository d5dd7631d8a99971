package engine

import "testing"

// TestMessageTakenIsEncodeFrame: the hand-written message.taken frame is
// the bytes EncodeFrame writes for MessageTakenFrame, whatever the id.
func TestMessageTakenIsEncodeFrame(t *testing.T) {
	for _, id := range []string{"m1", `a"b\c`, "é\u2028<&>", "\x01\x7f", "\xff"} {
		want, err := EncodeFrame(FrameMessageTaken, MessageTakenFrame{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if got := messageTaken(id); string(got) != string(want) {
			t.Errorf("messageTaken(%q) = %s, want %s", id, got, want)
		}
	}
}
