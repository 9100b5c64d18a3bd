"""The ReAct agent: prompts (agents.prompts), the memory window (agents.memory), action
parsing (agents.parser), the agent itself (agents.react), model loading (agents.models) and
policies (agents.policies)."""
