"""The HTTP API a deck is served through: `/v1/responses` (Open Responses) and the legacy
`/v1/chat/completions`. Each keeps its wire schemas in a module of its own."""
