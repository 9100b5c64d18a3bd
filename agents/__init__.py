"""The ReAct agent: prompts (gagpo.agents.prompts), the memory window (gagpo.agents.memory),
action parsing (gagpo.agents.parser), the agent itself (gagpo.agents.react), model loading
(gagpo.agents.models) and policies (gagpo.agents.policies)."""
