package engine

import "context"

// Agent returns the session's agent config as the worker last set it: the
// tools it declares, with their handlers, are what an adapter that speaks
// another front end's protocol needs to know (which tools run in the
// browser).
func (s *Session) Agent(ctx context.Context) (AgentConfig, error) {
	var a AgentConfig
	err := s.do(ctx, func() error {
		a = s.agent
		a.Tools = append([]AgentTool(nil), s.agent.Tools...)
		return nil
	})
	return a, err
}
