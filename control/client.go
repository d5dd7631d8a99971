package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrNotRunning: no gateway answers on the data directory's control
// socket (none runs, or one of a version without it, or one that left its
// socket behind as it was killed): the command opens the store itself,
// whose lock says whether a gateway holds it.
var ErrNotRunning = errors.New("no gateway answers on the control socket")

// Client speaks to the gateway that runs on a data directory.
type Client struct {
	http *http.Client
}

// Dial connects to the control socket in dir: ErrNotRunning when nothing
// listens there.
func Dial(ctx context.Context, dir string) (*Client, error) {
	path := filepath.Join(dir, SocketName)
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("%w (no socket can be at %s: its path is too long)", ErrNotRunning, path)
	}
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", path)
		if err != nil {
			return nil, err
		}
		// The process that listens is the gateway's user's, or root's: a
		// socket another user put in a directory open to it would answer
		// for the gateway ("deleted").
		if err := checkPeer(c); err != nil {
			c.Close()
			return nil, fmt.Errorf("control socket %s is not the gateway's: %w", path, err)
		}
		return c, nil
	}
	conn, err := dial(ctx)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w (%s)", ErrNotRunning, path)
		}
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	conn.Close()
	return &Client{http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
	}}}, nil
}

// Close releases the client's connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Sessions copies the gateway's list of every session, one JSON Session a
// line, to w.
func (c *Client) Sessions(ctx context.Context, w io.Writer) error {
	resp, err := c.do(ctx, http.MethodGet, "/sessions")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return answerErr(resp)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

// Delete asks the gateway to delete session id: nil once it is gone.
func (c *Client) Delete(ctx context.Context, id string) error {
	resp, err := c.do(ctx, http.MethodDelete, "/sessions/"+url.PathEscape(id))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return answerErr(resp)
	}
	return nil
}

// Backup asks the gateway to copy its store into dir, a new data
// directory (an absolute path), and returns what it says it copied.
func (c *Client) Backup(ctx context.Context, dir string) (string, error) {
	resp, err := c.do(ctx, http.MethodPost, "/backup?to="+url.QueryEscape(dir))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", answerErr(resp)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return string(b), err
}

func (c *Client) do(ctx context.Context, method, path string) (*http.Response, error) {
	// The host is no one's: the socket is the address.
	req, err := http.NewRequestWithContext(ctx, method, "http://gateway"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the running gateway did not answer: %w", err)
	}
	return resp, nil
}

// answerErr is the gateway's refusal, in its words.
func answerErr(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	msg := strings.TrimSpace(string(b))
	if msg == "" {
		msg = resp.Status
	}
	return fmt.Errorf("the gateway answered %d: %s", resp.StatusCode, msg)
}
