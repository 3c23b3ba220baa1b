"""Route Claude's client-side memory tool to memdir.

Claude's memory tool (`{"type": "memory_20250818", "name": "memory"}`) asks the application to
run `view`, `create`, `str_replace`, `insert`, `delete` and `rename` on files under /memories.
memdir runs them on its notes (versioned, searchable, synced): forward each tool_use input to
`POST /api/v1/memory-tool` and hand the result string back.

    memdir serve --transport http                 # in another terminal (port 8787)
    python examples/memory_tool.py                 # needs ANTHROPIC_API_KEY and `pip install anthropic`

`run_memory_tool` alone needs nothing beyond the standard library.
"""

import json
import os
import urllib.error
import urllib.request

MEMDIR_URL = os.environ.get("MEMDIR_URL", "http://127.0.0.1:8787")
MEMDIR_TOKEN = os.environ.get("MEMDIR_TOKEN")


def run_memory_tool(tool_input, url=MEMDIR_URL, token=MEMDIR_TOKEN):
    """Runs one memory-tool command on memdir: (result string, is_error)."""
    request = urllib.request.Request(
        f"{url}/api/v1/memory-tool",
        data=json.dumps(tool_input).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)["result"], False
    except urllib.error.HTTPError as e:
        body = json.load(e)
        return body["error"]["message"], True


def chat(prompt):
    """One conversation turn with the memory tool, running its commands on memdir."""
    import anthropic

    client = anthropic.Anthropic()
    messages = [{"role": "user", "content": prompt}]
    while True:
        reply = client.beta.messages.create(
            model=os.environ.get("MODEL", "claude-sonnet-4-5"),
            max_tokens=2048,
            messages=messages,
            tools=[{"type": "memory_20250818", "name": "memory"}],
            betas=["context-management-2025-06-27"],
        )
        messages.append({"role": "assistant", "content": reply.content})
        uses = [b for b in reply.content if b.type == "tool_use" and b.name == "memory"]
        if not uses:
            return "".join(b.text for b in reply.content if b.type == "text")
        results = []
        for use in uses:
            text, is_error = run_memory_tool(use.input)
            results.append(
                {"type": "tool_result", "tool_use_id": use.id, "content": text, "is_error": is_error}
            )
        messages.append({"role": "user", "content": results})


if __name__ == "__main__":
    print(chat("Remember that the staging box is staging-2, then tell me what you remember."))
