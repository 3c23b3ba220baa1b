claude mcp add --scope user memdir -- memdir serve
